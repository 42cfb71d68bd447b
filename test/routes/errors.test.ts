import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import Database from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import postgres from 'postgres'
import { InstrumentedStorage, openStorage } from '../../src/storage/index.js'
import { open } from '../../src/storage/sqlite/index.js'
import { bearer, buildTestApp, checkEveryResponse, expectServerError, type TestApp } from '../helpers/app.js'
import { POSTGRES_URL, postgresBackend, type TestDatabase } from '../helpers/backends.js'
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js'

/** POSTs plant `id` (named x) to `app` as the holder of `auth`. */
const postPlant = (app: FastifyInstance, auth: { authorization: string }, id: number) =>
  app.inject({
    method: 'POST',
    url: '/plants',
    headers: { ...auth, 'content-type': 'application/json' },
    payload: `{"id": ${id}, "name": "x"}`,
  })

/** The storage-unavailable answer: 503, Retry-After 1, the Error shape. */
function assertUnavailable(res: { statusCode: number; headers: Record<string, unknown>; json(): unknown }): void {
  assert.equal(res.statusCode, 503)
  assert.equal(res.headers['retry-after'], '1')
  assert.deepEqual(res.json(), { error: 50301, message: 'storage is unavailable; retry shortly' })
}

describe('server errors', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
    // Hidden: a test route, not part of the documented API.
    t.app.get('/boom', { schema: { hide: true } }, async () => {
      throw new Error('SELECT * FROM secret_table failed at /srv/internal/path.ts:42')
    })
  })
  after(() => t.close())

  test('answers an unexpected failure with 500 and a message that leaks nothing', async () => {
    const res = await expectServerError(500, () => t.app.inject({ method: 'GET', url: '/boom' }))
    assert.equal(res.statusCode, 500)
    assert.deepEqual(res.json(), { error: 50001, message: 'internal server error' })
  })
})

describe('storage unavailable (sqlite)', () => {
  let dir: string
  let storage: InstrumentedStorage
  let app: FastifyInstance
  let headers: { authorization: string }
  let locker: Database.Database
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'plantstore-busy-'))
    const file = join(dir, 'store.db')
    storage = new InstrumentedStorage(await open(file, { migrate: true, busyTimeoutMs: 50 }))
    const { secret } = await issueToken(storage, { accountName: 'a', scopes: ['plants:write'] })
    headers = bearer(secret)
    app = checkEveryResponse(await buildApp({ storage }))
    locker = new Database(file)
  })
  after(async () => {
    locker.close()
    await app.close()
    await storage.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const post = () => postPlant(app, headers, 1)

  test('answers 503 with Retry-After while another process holds the write lock, then recovers', async () => {
    locker.exec('BEGIN EXCLUSIVE')
    const busy = await expectServerError(503, post)
    assertUnavailable(busy)
    const notReady = await expectServerError(503, () => app.inject({ method: 'GET', url: '/readyz' }))
    assert.equal(notReady.statusCode, 503)
    assert.equal(notReady.json().error, 50301)
    locker.exec('COMMIT')
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again before any write')
    assert.equal((await post()).statusCode, 200)
  })
})

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('storage unavailable (postgres)', () => {
    let database: TestDatabase
    let proxy: TcpProxy
    let storage: InstrumentedStorage
    let app: FastifyInstance
    let headers: { authorization: string }
    let admin: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      const direct = new URL(database.url)
      proxy = await startTcpProxy(direct.hostname, Number(direct.port || 5432))
      const viaProxy = new URL(database.url)
      viaProxy.host = `127.0.0.1:${proxy.port}`
      // A short lock_timeout, so a held lock shows up as 503 within the test instead of a long wait.
      viaProxy.searchParams.set('lock_timeout', '100')
      storage = await openStorage(viaProxy.toString())
      const { secret } = await issueToken(storage, { accountName: 'a', scopes: ['plants:write'] })
      headers = bearer(secret)
      app = checkEveryResponse(await buildApp({ storage }))
      admin = postgres(database.url, { max: 1, onnotice: () => {} })
    })
    after(async () => {
      await app.close()
      await storage.close()
      await admin.end()
      await proxy.close()
      await database.dispose()
    })

    const post = (id: number) => postPlant(app, headers, id)

    test('answers 503 with Retry-After while another session holds the table lock, then recovers', async () => {
      await admin.begin(async (tx) => {
        await tx`LOCK TABLE plants IN ACCESS EXCLUSIVE MODE`
        const busy = await expectServerError(503, () => post(1))
        assertUnavailable(busy)
      })
      assert.equal((await post(1)).statusCode, 200)
    })

    test('answers 503 after the default 5 s lock timeout instead of waiting forever on a held lock', async () => {
      const plain = await openStorage(database.url)
      const plainApp = checkEveryResponse(await buildApp({ storage: plain }))
      try {
        await admin.begin(async (tx) => {
          await tx`LOCK TABLE plants IN ACCESS EXCLUSIVE MODE`
          assertUnavailable(await expectServerError(503, () => postPlant(plainApp, headers, 3)))
        })
      } finally {
        await plainApp.close()
        await plain.close()
      }
    })

    test('answers 503 to a request in flight when the server ends its connection as a stopping PostgreSQL does, then recovers', async () => {
      const plain = await openStorage(database.url)
      const plainApp = checkEveryResponse(await buildApp({ storage: plain }))
      const postFive = () => postPlant(plainApp, headers, 5)
      try {
        await admin.begin(async (tx) => {
          await tx`LOCK TABLE plants IN ACCESS EXCLUSIVE MODE`
          const inFlight = expectServerError(503, postFive)
          // A fast shutdown ends every session with 57P01 (admin_shutdown), as pg_terminate_backend does here.
          const deadline = Date.now() + 4000
          for (let ended = 0; ended === 0;) {
            assert.ok(Date.now() < deadline, 'the request never waited on the lock')
            await new Promise((resolve) => setTimeout(resolve, 20))
            // Only the sessions waiting on this transaction's lock: other test runs may share the database server.
            const rows = await tx`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'plantstore'
                AND pg_backend_pid() = ANY(pg_blocking_pids(pid))`
            ended = rows.length
          }
          assertUnavailable(await inFlight)
        })
        assert.equal((await postFive()).statusCode, 200)
      } finally {
        await plainApp.close()
        await plain.close()
      }
    })

    test('answers writes with 503 and reports not ready on a read-only database, still serving reads', async () => {
      const readOnlyUrl = new URL(database.url)
      readOnlyUrl.searchParams.set('default_transaction_read_only', 'on')
      const readOnly = await openStorage(readOnlyUrl.toString(), { migrate: false })
      const readOnlyApp = checkEveryResponse(await buildApp({ storage: readOnly }))
      const { secret } = await issueToken(storage, { accountName: 'b' })
      try {
        assert.equal((await readOnlyApp.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
        assertUnavailable(await expectServerError(503, () => postPlant(readOnlyApp, bearer(secret), 6)))
        const notReady = await expectServerError(503, () => readOnlyApp.inject({ method: 'GET', url: '/readyz' }))
        assert.equal(notReady.statusCode, 503)
        assert.equal(notReady.json().error, 50301)
        const reads = await readOnlyApp.inject({ method: 'GET', url: '/plants', headers: bearer(secret) })
        assert.equal(reads.statusCode, 200)
      } finally {
        await readOnlyApp.close()
        await readOnly.close()
      }
    })

    test('answers 503 while the database cannot be reached, then recovers without a restart', async () => {
      await proxy.cut()
      const down = await expectServerError(503, () => post(2))
      const notReady = await expectServerError(503, () => app.inject({ method: 'GET', url: '/readyz' }))
      assert.equal(notReady.statusCode, 503)
      assert.equal(notReady.json().error, 50301)
      assertUnavailable(down)
      await proxy.restore()
      assert.equal((await post(2)).statusCode, 200)
      assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
    })
  })
