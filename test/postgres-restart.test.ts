import assert from 'node:assert/strict'
import { execFile, execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, existsSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { after, before, describe, test } from 'node:test'
import { cleanup, eventually, http, startServer, tempDir, type ServerProcess } from './helpers/server-process.js'

after(cleanup)

// A PostgreSQL server of this test's own, in a temporary directory, so stopping it mid-run touches no other
// database. Its programs come from pg_config (Debian: /usr/lib/postgresql/<version>/bin).
const BIN = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout?.trim() ?? ''
const available = BIN !== '' && existsSync(join(BIN, 'initdb'))
const skip = available ? false : 'needs PostgreSQL server programs (initdb, pg_ctl) where pg_config --bindir says'
// PostgreSQL refuses to run as root: then it runs as the postgres user.
const asRoot = process.getuid?.() === 0
const runAs = asRoot ? ['runuser', '-u', 'postgres', '--'] : []

const TOKEN = 'pg-restart-' + randomBytes(30).toString('base64url')

/** Runs a PostgreSQL program; asynchronously, so the test's clients keep sending meanwhile. */
async function pg(program: string, ...args: string[]): Promise<void> {
  const [command, ...rest] = [...runAs, join(BIN, program), ...args]
  await promisify(execFile)(command!, rest)
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })
}

describe('plantstore serve when its PostgreSQL server stops mid-run and starts again', { skip }, () => {
  let dir: string
  let server: ServerProcess
  let pgOptions: string
  const data = () => join(dir, 'data')
  const startPostgres = () => pg('pg_ctl', '-D', data(), '-o', pgOptions, '-l', join(dir, 'log'), '-w', 'start')
  const stopPostgres = () => pg('pg_ctl', '-D', data(), '-m', 'fast', '-w', 'stop')
  const post = (id: number) => http(server.baseUrl, 'POST', '/plants', { token: TOKEN, body: { id, name: `p${id}` } })
  /** Every stored plant's id, following the next links. */
  const storedIds = async () => {
    const ids = new Set<number>()
    for (let path: string | undefined = '/plants?fields=id,name&limit=1000'; path !== undefined;) {
      const res = await http(server.baseUrl, 'GET', path, { token: TOKEN })
      assert.equal(res.status, 200, res.text)
      for (const plant of JSON.parse(res.text) as Array<{ id: number }>) ids.add(plant.id)
      path = /^<([^>]+)>/.exec(res.headers.get('link') ?? '')?.[1]
    }
    return ids
  }

  before(async () => {
    dir = tempDir()
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }))
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }))
      chownSync(dir, uid, gid)
    }
    const port = await freePort()
    pgOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`
    await pg('initdb', '-D', data(), '-U', 'postgres', '--auth=trust', '--no-sync')
    await startPostgres()
    server = await startServer({
      database: `postgres://postgres@127.0.0.1:${port}/postgres`,
      // No per-token rate limit: the load must meet the outage, not the limit.
      env: { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN, PLANTSTORE_RATE_LIMIT: '0', PLANTSTORE_ACCOUNT_RATE_LIMIT: '0' },
    })
    await eventually(async () => (await post(1)).status === 200, 10_000)
  })
  after(async () => {
    await server?.stop('SIGKILL')
    if (dir !== undefined && existsSync(join(data(), 'postmaster.pid')))
      await pg('pg_ctl', '-D', data(), '-m', 'immediate', 'stop')
  })

  test('answers 503 at once (never 500) during the outage, reports not ready, and recovers without a restart, keeping every plant it acknowledged', async () => {
    const statuses = new Map<number, number>()
    let nextId = 2
    let loading = true
    let slowest = 0
    // Four clients writing new plants back to back, across the stop and the start.
    const clients = Array.from({ length: 4 }, async () => {
      while (loading) {
        const id = nextId++
        const started = Date.now()
        statuses.set(id, (await post(id)).status)
        slowest = Math.max(slowest, Date.now() - started)
      }
    })
    await eventually(async () => statuses.size >= 20, 10_000, 10)
    await stopPostgres()
    const down = await http(server.baseUrl, 'GET', '/readyz')
    assert.equal(down.status, 503, down.text)
    assert.equal(JSON.parse(down.text).error, 50301)
    const refused = await post(1_000_000)
    assert.equal(refused.status, 503, refused.text)
    assert.equal(refused.headers.get('retry-after'), '1')
    assert.deepEqual(JSON.parse(refused.text), { error: 50301, message: 'storage is unavailable; retry shortly' })

    await startPostgres()
    await eventually(async () => (await http(server.baseUrl, 'GET', '/readyz')).status === 200, 15_000)
    const afterRestart = statuses.size
    await eventually(async () => statuses.size >= afterRestart + 20, 10_000, 10)
    loading = false
    await Promise.all(clients)

    const seen = [...statuses.values()]
    assert.deepEqual([...new Set(seen)].sort(), [200, 503], 'the load met the outage, and got only 200 or 503')
    // Fast: well within the 5 s connect timeout, even while the server is down or starting (no long reconnect backoff).
    assert.ok(slowest < 5000, `the slowest request took ${slowest} ms`)
    const stored = await storedIds()
    for (const [id, status] of statuses) if (status === 200) assert.ok(stored.has(id), `plant ${id} was answered 200`)
    assert.ok(stored.has(1))
    assert.equal(server.process.exitCode, null, 'the server never stopped')
  })
})
