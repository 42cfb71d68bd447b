import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { freePort, missingServerPrograms, ownForServers, pg } from './helpers/postgres-programs.js'
import { cleanup, eventually, http, startServer, tempDir, type ServerProcess } from './helpers/server-process.js'

after(cleanup)

// A PostgreSQL server of this test's own, in a temporary directory, so stopping it mid-run touches no other
// database. Without the server programs it is skipped, unless PLANTSTORE_TEST_REQUIRE_POSTGRES=1 (CI sets it): then a
// missing program fails it, so CI cannot pass without having run it.
const missing = missingServerPrograms(['initdb', 'pg_ctl'])
const required = process.env.PLANTSTORE_TEST_REQUIRE_POSTGRES === '1'
const skip =
  missing.length === 0 || required
    ? false
    : 'needs PostgreSQL server programs (initdb, pg_ctl) where pg_config --bindir says'

// How soon after the database's return the service must be ready and storing writes again (see the test).
const RECOVERY_MS = 1500

const TOKEN = 'pg-restart-' + randomBytes(30).toString('base64url')

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
    assert.deepEqual(missing, [], 'PLANTSTORE_TEST_REQUIRE_POSTGRES=1 but PostgreSQL server programs are missing')
    dir = tempDir()
    ownForServers(dir)
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

  test('answers 503 at once (never 500) during the outage, reports not ready, and recovers without a restart, keeping every plant it acknowledged', async (t) => {
    const statuses = new Map<number, number>()
    // When each write that got 200 was answered, to see the first after the database's return.
    const storedAt: number[] = []
    let nextId = 2
    let loading = true
    let slowest = 0
    // Four clients writing new plants back to back, across the stop and the start.
    const clients = Array.from({ length: 4 }, async () => {
      while (loading) {
        const id = nextId++
        const started = Date.now()
        const { status } = await post(id)
        statuses.set(id, status)
        if (status === 200) storedAt.push(Date.now())
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
    // pg_ctl start -w returns once the server accepts connections: the database is back.
    const back = Date.now()
    const readyAfter = await eventually(
      async () => (await http(server.baseUrl, 'GET', '/readyz')).status === 200,
      15_000,
      10,
    )
    const afterRestart = statuses.size
    await eventually(async () => statuses.size >= afterRestart + 20, 10_000, 10)
    loading = false
    await Promise.all(clients)
    const storedAfter = Math.min(...storedAt.filter((at) => at >= back)) - back
    t.diagnostic(`after the database's return: ready in ${readyAfter} ms, the first write stored in ${storedAfter} ms`)
    // The README promises recovery within about a second of the database's return: each pooled connection tries
    // again at most half a second after a failed attempt (src/storage/postgres/client.ts), and a connection and the
    // readiness probe's write take milliseconds. Measured here: at most 0.5 s in 9 runs, 4 of them with a CPU burner
    // on one core and a load average of 10 on this 2-core machine. 1.5 s leaves over a second for a machine slower
    // still; with the cap raised to 5 s, /readyz took over 3 s (the client's own backoff grows to 20 s).
    assert.ok(readyAfter < RECOVERY_MS, `/readyz answered 200 only ${readyAfter} ms after the database's return`)
    assert.ok(
      storedAfter < RECOVERY_MS,
      `the first write was stored only ${storedAfter} ms after the database's return`,
    )

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
