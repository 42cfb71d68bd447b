import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { appendFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { assertMountNamespace, skipWithoutMountNamespace } from './helpers/mount-namespace.js'
import { cleanup, eventually, http, startServer, tempDir, type ServerProcess } from './helpers/server-process.js'

after(cleanup)

// The store lives on a 4 MiB tmpfs mounted in a mount namespace of the server's own (a user namespace makes that
// possible without root), so the test can fill that disk for real without touching the machine's.
const MOUNT = 'mount -t tmpfs -o size=4m plantstore-test "$0" && exec "$@"'

const TOKEN = 'disk-full-' + randomBytes(30).toString('base64url')

/** Writes zeros to `file` until the filesystem says it is full. */
function fillDisk(file: string): void {
  const chunk = Buffer.alloc(64 * 1024)
  for (;;) {
    try {
      appendFileSync(file, chunk)
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOSPC') return
      throw err
    }
  }
}

describe('plantstore serve on SQLite when the disk fills up', { skip: skipWithoutMountNamespace }, () => {
  let server: ServerProcess
  let filler: string
  const post = (id: number) => http(server.baseUrl, 'POST', '/plants', { token: TOKEN, body: { id, name: `p${id}` } })
  const list = async () => (await http(server.baseUrl, 'GET', '/plants?fields=id,name', { token: TOKEN })).text
  const readyz = () => http(server.baseUrl, 'GET', '/readyz')

  before(async () => {
    assertMountNamespace()
    const dir = tempDir()
    server = await startServer({
      database: `sqlite:${join(dir, 'store.db')}`,
      prefix: ['unshare', '-Urm', 'sh', '-c', MOUNT, dir],
      env: { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN },
    })
    // The server's view of the directory: its tmpfs, not the empty directory this process sees.
    filler = `/proc/${server.process.pid}/root${dir}/filler`
    await eventually(async () => (await post(1)).status === 200, 10_000)
  })
  after(() => server.stop('SIGKILL'))

  test('answers writes with 503 in the Error shape, reports not ready, and keeps serving reads', async () => {
    fillDisk(filler)
    const full = await post(2)
    assert.equal(full.status, 503, full.text)
    assert.equal(full.headers.get('retry-after'), '1')
    assert.deepEqual(JSON.parse(full.text), { error: 50301, message: 'storage is unavailable; retry shortly' })
    const notReady = await readyz()
    assert.equal(notReady.status, 503)
    assert.equal(JSON.parse(notReady.text).error, 50301)
    assert.equal(await list(), '[{"name":"p1","id":1}]')
  })

  test('stays not ready after a write that changed nothing succeeds: only a committed probe write counts', async () => {
    // A DELETE of an absent id commits no page, so it succeeds on a full disk: it proves nothing about writes.
    const absent = await http(server.baseUrl, 'DELETE', '/plants/424242', { token: TOKEN })
    assert.equal(absent.status, 404, absent.text)
    assert.equal((await readyz()).status, 503)
  })

  test('recovers by itself once space is freed: ready again before any client writes, then stores new plants', async () => {
    rmSync(filler)
    const ready = await readyz()
    assert.equal(ready.status, 200, ready.text)
    assert.equal((await post(3)).status, 200)
    assert.equal(await list(), '[{"name":"p1","id":1},{"name":"p3","id":3}]', 'the refused plant 2 was not stored')
    assert.equal(server.process.exitCode, null, 'the process never stopped')
  })
})
