import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import Database from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { SqliteStorage } from '../../src/storage/sqlite/index.js'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'

describe('server errors', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
    t.app.get('/boom', async () => {
      throw new Error('SELECT * FROM secret_table failed at /srv/internal/path.ts:42')
    })
  })
  after(() => t.close())

  test('answers an unexpected failure with 500 and a message that leaks nothing', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/boom' })
    assert.equal(res.statusCode, 500)
    assert.deepEqual(res.json(), { error: 50001, message: 'internal server error' })
  })
})

describe('storage unavailable', () => {
  let dir: string
  let storage: SqliteStorage
  let app: FastifyInstance
  let headers: { authorization: string }
  let locker: Database.Database
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'plantstore-busy-'))
    const file = join(dir, 'store.db')
    storage = new SqliteStorage(file, { busyTimeoutMs: 50 })
    const { secret } = await issueToken(storage, { accountName: 'a', scopes: ['plants:write'] })
    headers = bearer(secret)
    app = await buildApp({ storage })
    locker = new Database(file)
  })
  after(async () => {
    locker.close()
    await app.close()
    await storage.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const post = () =>
    app.inject({
      method: 'POST',
      url: '/plants',
      headers: { ...headers, 'content-type': 'application/json' },
      payload: '{"id": 1, "name": "x"}',
    })

  test('answers 503 with Retry-After while another process holds the write lock, then recovers', async () => {
    locker.exec('BEGIN EXCLUSIVE')
    const busy = await post()
    assert.equal(busy.statusCode, 503)
    assert.equal(busy.headers['retry-after'], '1')
    assert.deepEqual(busy.json(), { error: 50301, message: 'storage is unavailable; retry shortly' })
    locker.exec('COMMIT')
    assert.equal((await post()).statusCode, 200)
  })
})
