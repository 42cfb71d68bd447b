import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { checkEveryResponse } from '../helpers/app.js'
import { backends, freshStorage } from '../helpers/backends.js'

describe('request log', () => {
  const lines: Array<Record<string, unknown>> = []
  let app: FastifyInstance
  let secret: string
  let tokenId: string
  let dispose: () => Promise<void>
  before(async () => {
    const fresh = await freshStorage(backends[0]!)
    dispose = fresh.dispose
    ;({
      secret,
      token: { id: tokenId },
    } = await issueToken(fresh.storage, { accountName: 'alice' }))
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>)
        done()
      },
    })
    app = checkEveryResponse(await buildApp({ storage: fresh.storage, logger: { level: 'info', stream } }))
  })
  after(async () => {
    await app.close()
    await dispose()
  })

  const linesOf = (reqId: string) => lines.filter((line) => line.reqId === reqId)

  test('writes exactly one line per request with id, method, route, status, duration and account, never the token', async () => {
    await app.inject({
      method: 'POST',
      url: '/plants',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-request-id': 'log-1' },
      payload: '{"id": 1, "name": "Logged"}',
    })
    const [line, ...rest] = linesOf('log-1')
    assert.deepEqual(rest, [])
    assert.equal(line?.msg, 'request completed')
    assert.equal(line?.method, 'POST')
    assert.equal(line?.route, '/plants')
    assert.equal(line?.status, 200)
    assert.equal(typeof line?.durationMs, 'number')
    assert.equal(line?.account, 'alice')
    assert.equal(line?.tokenId, tokenId)
    assert.ok(!JSON.stringify(lines).includes(secret.slice(4)), 'the token is not logged')
  })

  test('redacts an Authorization header wherever a log line carries headers', async () => {
    const authorization = `Bearer ${secret}`
    app.log.info({ req: { headers: { authorization } } }, 'redaction check 1')
    app.log.info({ headers: { authorization } }, 'redaction check 2')
    app.log.info({ request: { headers: { authorization } } }, 'redaction check 3')
    const checks = lines.filter((line) => String(line.msg).startsWith('redaction check'))
    assert.equal(checks.length, 3)
    assert.ok(!JSON.stringify(checks).includes(secret.slice(4)), JSON.stringify(checks))
  })

  test("redacts it in a child logger's bindings, and keeps what a request and an error serialise to", async () => {
    const authorization = `Bearer ${secret}`
    app.log.child({ headers: { authorization } }).info('redaction check 4')
    const error = Object.assign(new Error('upstream refused'), { headers: { authorization } })
    app.log.error({ err: error }, 'redaction check 5')
    const checks = lines.filter((line) => /^redaction check [45]$/.test(String(line.msg)))
    assert.equal(checks.length, 2)
    assert.ok(!JSON.stringify(checks).includes(secret.slice(4)), JSON.stringify(checks))
    const err = checks[1]?.err as { type?: string; message?: string; stack?: string }
    assert.equal(err.type, 'Error')
    assert.equal(err.message, 'upstream refused')
    assert.match(String(err.stack), /upstream refused\n\s+at /)
  })

  test('logs the route pattern, not the id, and no account for an unauthenticated request', async () => {
    await app.inject({ method: 'DELETE', url: '/plants/77', headers: { 'x-request-id': 'log-2' } })
    const [line] = linesOf('log-2')
    assert.equal(line?.route, '/plants/:id')
    assert.equal(line?.status, 401)
    assert.equal(line?.account, null)
  })

  test('logs no part of a token sent in the query string or the path, and keeps the route and the other parameters', async () => {
    const jwt = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg'
    const cases: Array<[string, string, string, string[]]> = [
      ['GET', `/plants?access_token=${secret}&limit=5`, '/plants', ['limit=5', 'access_token=[Redacted]']],
      ['GET', `/plants?tag=fern&token=${secret}`, '/plants', ['tag=fern', 'token=[Redacted]']],
      ['GET', `/plants?limit=5&q=${jwt}`, '/plants', ['limit=5', 'q=[Redacted]']],
      ['GET', `/plants?access_token=${jwt}`, '/plants', ['access_token=[Redacted]']],
      ['DELETE', `/tokens/${secret}`, '/tokens/:id', ['/tokens/[Redacted]']],
      ['DELETE', `/tokens/${encodeURIComponent(secret).replace('p', '%70')}`, '/tokens/:id', ['/tokens/[Redacted]']],
    ]
    for (const [index, [method, url, route, shown]] of cases.entries()) {
      const id = `log-url-${index}`
      await app.inject({ method: method as 'GET', url, headers: { 'x-request-id': id } })
      const [line] = linesOf(id)
      const text = JSON.stringify(line)
      for (const part of [secret.slice(4), ...jwt.split('.')]) assert.ok(!text.includes(part), text)
      assert.equal(line?.route, route, text)
      for (const kept of shown) assert.ok(String(line?.url).includes(kept), text)
    }
  })

  test('logs the client address of every request, the socket peer when no proxy is trusted', async () => {
    await app.inject({
      method: 'GET',
      url: '/healthz',
      remoteAddress: '127.0.0.9',
      headers: { 'x-request-id': 'log-client-1', 'x-forwarded-for': '203.0.113.7' },
    })
    assert.equal(linesOf('log-client-1')[0]?.client, '127.0.0.9')
  })

  test('logs unmatched routes with a null route', async () => {
    await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': 'log-3' } })
    const [line] = linesOf('log-3')
    assert.equal(line?.route, null)
    assert.equal(line?.status, 404)
  })
})

describe('request log behind a trusted proxy, with the failed-authentication throttle', () => {
  const lines: Array<Record<string, unknown>> = []
  let app: FastifyInstance
  let dispose: () => Promise<void>
  before(async () => {
    const fresh = await freshStorage(backends[0]!)
    dispose = fresh.dispose
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>)
        done()
      },
    })
    app = checkEveryResponse(
      await buildApp({
        storage: fresh.storage,
        logger: { level: 'info', stream },
        trustProxy: true,
        rateLimit: { perToken: { max: 0, windowMs: 60_000 }, authFailures: { max: 2, windowMs: 60_000 } },
      }),
    )
  })
  after(async () => {
    await app.close()
    await dispose()
  })

  test('logs the address X-Forwarded-For names, as TRUST_PROXY resolves it', async () => {
    await app.inject({
      method: 'GET',
      url: '/healthz',
      remoteAddress: '127.0.0.9',
      headers: { 'x-request-id': 'proxied-1', 'x-forwarded-for': '203.0.113.7' },
    })
    assert.equal(lines.find((line) => line.reqId === 'proxied-1')?.client, '203.0.113.7')
  })

  test("logs a throttled client's 429 with its address", async () => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      const res = await app.inject({
        method: 'GET',
        url: '/plants',
        remoteAddress: '127.0.0.9',
        headers: { 'x-request-id': `throttled-${i}`, 'x-forwarded-for': '203.0.113.8', authorization: 'Bearer wrong' },
      })
      statuses.push(res.statusCode)
    }
    assert.equal(statuses.at(-1), 429, statuses.join(' '))
    const refused = lines.find((line) => line.reqId === 'throttled-3')
    assert.equal(refused?.status, 429)
    assert.equal(refused?.client, '203.0.113.8')
  })
})
