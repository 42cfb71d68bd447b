import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { hashSecret, newTokenSecret, parseDuration } from '../../src/auth/tokens.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import { sqliteFile } from '../../src/storage/index.js'
import { checkEveryResponse } from '../helpers/app.js'
import { backends, freshStorage } from '../helpers/backends.js'

describe('tokens', () => {
  test('are pst_ followed by 32 random bytes in base64url, never repeating', () => {
    const secrets = new Set(Array.from({ length: 1000 }, () => newTokenSecret()))
    assert.equal(secrets.size, 1000)
    for (const secret of secrets) assert.match(secret, /^pst_[A-Za-z0-9_-]{43}$/)
    assert.equal(Buffer.from([...secrets][0]!.slice(4), 'base64url').length, 32)
  })

  test('parse expiry durations in seconds, minutes, hours and days', () => {
    assert.equal(parseDuration('90s'), 90_000)
    assert.equal(parseDuration('15m'), 900_000)
    assert.equal(parseDuration('12h'), 43_200_000)
    assert.equal(parseDuration('30d'), 2_592_000_000)
    for (const bad of ['0d', '30', 'd', '1.5h', '-1d', '30w', '']) assert.equal(parseDuration(bad), undefined, bad)
  })

  describe('at rest and in logs', () => {
    let storage: InstrumentedStorage
    let url: string
    let dispose: () => Promise<void>
    let secret: string
    before(async () => {
      ;({ storage, url, dispose } = await freshStorage(backends[0]!))
      ;({ secret } = await issueToken(storage, { accountName: 'a' }))
    })
    after(() => dispose())

    test('are stored only as their SHA-256 hash', () => {
      const dir = dirname(sqliteFile(url)!)
      const bytes = Buffer.concat(readdirSync(dir).map((file) => readFileSync(join(dir, file))))
      assert.ok(bytes.includes(hashSecret(secret)), 'the hash is stored')
      assert.ok(!bytes.includes(Buffer.from(secret)), 'the secret is not')
      assert.ok(!bytes.includes(Buffer.from(secret.slice(4))), 'not even without its prefix')
    })

    test('never appear in the logs, even at trace level', async () => {
      const lines: string[] = []
      const stream = new Writable({
        write(chunk, _encoding, done) {
          lines.push(String(chunk))
          done()
        },
      })
      const app = checkEveryResponse(await buildApp({ storage, logger: { level: 'trace', stream } }))
      const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }
      const created = await app.inject({ method: 'POST', url: '/plants', headers, payload: '{"id": 1, "name": "x"}' })
      assert.equal(created.statusCode, 200, created.body)
      assert.equal((await app.inject({ method: 'GET', url: '/plants', headers })).statusCode, 200)
      const refused = await app.inject({
        method: 'GET',
        url: '/plants',
        headers: { authorization: 'Bearer pst_wrong' },
      })
      assert.equal(refused.statusCode, 401)
      await app.close()
      assert.ok(lines.length > 4, 'requests were logged')
      const logs = lines.join('')
      assert.ok(!logs.includes(secret.slice(4)))
      assert.ok(!logs.includes('pst_wrong'))
    })

    test('never appear in error bodies, response headers or /metrics', async () => {
      const app = checkEveryResponse(await buildApp({ storage }))
      const nearMiss = secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A')
      const invalidToken = { status: 401, error: 40102 }
      // Each Authorization with how it is refused; the valid token's requests fail on what they ask instead.
      const sent: Array<[string, { status: number; error: number } | undefined]> = [
        [`Bearer ${secret}`, undefined],
        [`Bearer ${nearMiss}`, invalidToken],
        [`Bearer ${secret} trailing`, invalidToken],
        [`Basic ${secret}`, { status: 401, error: 40101 }],
        [`Bearer ${secret.repeat(20)}`, invalidToken],
      ]
      const requests = [
        { method: 'GET', url: '/plants?limit=0', headers: {}, wrong: { status: 400, error: 40001 } },
        {
          method: 'POST',
          url: '/plants',
          headers: { 'content-type': 'text/plain' },
          wrong: { status: 415, error: 41501 },
        },
        { method: 'DELETE', url: '/plants/x', headers: {}, wrong: { status: 400, error: 40001 } },
      ] as const
      const seen: string[] = []
      for (const [authorization, refusal] of sent) {
        for (const { method, url, headers, wrong } of requests) {
          const res = await app.inject({ method, url, headers: { authorization, ...headers } })
          const what = `${method} ${url} with ${authorization.slice(0, 10)}…: ${res.body}`
          assert.equal(res.statusCode, (refusal ?? wrong).status, what)
          assert.equal(res.json().error, (refusal ?? wrong).error, what)
          seen.push(res.body, JSON.stringify(res.headers))
        }
      }
      const metrics = await app.inject({ method: 'GET', url: '/metrics' })
      assert.equal(metrics.statusCode, 200)
      assert.match(metrics.body, /plantstore_auth_failures_total/)
      seen.push(metrics.body)
      await app.close()
      const text = seen.join('\n')
      for (const leaked of [secret.slice(4), nearMiss.slice(4)]) assert.ok(!text.includes(leaked))
    })
  })

  if (backends[1] !== undefined)
    test('are stored only as their SHA-256 hash on PostgreSQL too', async () => {
      const { storage, url, dispose } = await freshStorage(backends[1]!)
      const { secret } = await issueToken(storage, { accountName: 'a', label: 'l' })
      const sql = postgres(url, { max: 1, onnotice: () => {} })
      try {
        const tables = await sql<{ name: string }[]>`SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = current_schema()`
        const rows = await Promise.all(
          tables.map(({ name }) => sql<{ row: string }[]>`SELECT t::text AS row FROM ${sql(name)} t`),
        )
        const dump = rows
          .flat()
          .map(({ row }) => row)
          .join('\n')
        assert.ok(dump.includes(hashSecret(secret).toString('hex')), 'the hash is stored')
        assert.ok(!dump.includes(secret.slice(4)), 'the secret is not')
      } finally {
        await sql.end()
        await dispose()
      }
    })
})
