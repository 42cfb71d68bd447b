import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { OutgoingHttpHeaders } from 'node:http'
import type { LightMyRequestResponse } from 'fastify'
import { CORS_MAX_AGE_SECONDS } from '../../src/config.js'
import { parseRate } from '../../src/limits/rate.js'
import { bearer, buildTestApp, expectServerError, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'

const ALLOWED = 'http://127.0.0.1:5173'
const OTHER = 'http://127.0.0.2:5173'

const accessControl = (res: LightMyRequestResponse) =>
  Object.keys(res.headers).filter((name) => name.startsWith('access-control-'))

const preflight = (t: TestApp, origin: string, method = 'POST') =>
  t.app.inject({
    method: 'OPTIONS',
    url: '/plants',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization' },
  })

for (const backend of backends) {
  describe(`CORS (${backend.name})`, () => {
    let t: TestApp
    const lifecycle = { draining: false }
    before(async () => {
      t = await buildTestApp(backend, undefined, undefined, {
        lifecycle,
        cors: { origins: [ALLOWED, 'https://app.example.com'] },
        // Two requests a minute per token: a preflight that counted would leave none for the requests after it.
        // So each test that sends a token makes its own, on an account of its own, and spends no other test's budget.
        rateLimit: { perToken: parseRate('2/min'), perAccount: parseRate('0'), authFailures: parseRate('1/min') },
      })
    })
    after(() => t.close())

    test('answers a preflight from an allowed origin with 204, the methods, the headers and a max age', async () => {
      const res = await preflight(t, ALLOWED)
      assert.equal(res.statusCode, 204, res.body)
      assert.equal(res.body, '')
      assert.equal(res.headers['access-control-allow-origin'], ALLOWED)
      assert.equal(res.headers['access-control-allow-methods'], 'GET, HEAD, POST, DELETE')
      assert.equal(res.headers['access-control-allow-headers'], 'authorization, content-type, idempotency-key')
      assert.equal(res.headers['access-control-max-age'], String(CORS_MAX_AGE_SECONDS))
      assert.equal(res.headers['access-control-allow-credentials'], undefined, 'tokens travel in a header, not cookies')
      assert.match(String(res.headers.vary), /origin/i)
    })

    test('answers preflights without a token and counts them against no limit', async () => {
      // An address of its own whose failed-authentication budget (1 a minute) is spent: its requests with a token
      // get 429 now, and its preflights still 204.
      const remoteAddress = '127.0.0.9'
      const stranger = { authorization: 'Bearer pst_' + 'A'.repeat(43) }
      const guess = () => t.app.inject({ method: 'GET', url: '/plants', headers: stranger, remoteAddress })
      assert.equal((await guess()).statusCode, 401)
      assert.equal((await guess()).statusCode, 429)
      for (let i = 0; i < 5; i++) {
        const res = await t.app.inject({
          method: 'OPTIONS',
          url: '/plants',
          headers: { origin: ALLOWED, 'access-control-request-method': 'DELETE' },
          remoteAddress,
        })
        assert.equal(res.statusCode, 204)
      }
      // Nor do they spend one: an address whose preflights carried a wrong token (no browser sends one; a preflight
      // that reached authentication would be refused and counted) still has its one failure of the minute.
      const fresh = '127.0.0.10'
      for (let i = 0; i < 5; i++) {
        const res = await t.app.inject({
          method: 'OPTIONS',
          url: '/plants',
          headers: { ...stranger, origin: ALLOWED, 'access-control-request-method': 'GET' },
          remoteAddress: fresh,
        })
        assert.equal(res.statusCode, 204)
      }
      const firstGuess = await t.app.inject({ method: 'GET', url: '/plants', headers: stranger, remoteAddress: fresh })
      assert.equal(firstGuess.statusCode, 401, 'the preflights spent nothing of the address’s failure budget')
      const own = bearer(await t.token('preflighted'))
      const list = () => t.app.inject({ method: 'GET', url: '/plants', headers: { ...own, origin: ALLOWED } })
      assert.equal((await list()).statusCode, 200)
      assert.equal((await list()).statusCode, 200)
      const third = await list()
      assert.equal(third.statusCode, 429, 'the limit is live: the third request of the minute is refused')
      assert.equal(third.headers['access-control-allow-origin'], ALLOWED, 'a 429 is readable by the page too')
    })

    test('grants answers to an allowed origin, exposing the headers a page needs', async () => {
      const headers = bearer(await t.token('granted'))
      const res = await t.app.inject({
        method: 'GET',
        url: '/plants?limit=1',
        headers: { ...headers, origin: ALLOWED },
      })
      assert.equal(res.statusCode, 200)
      assert.equal(res.headers['access-control-allow-origin'], ALLOWED)
      assert.match(String(res.headers.vary), /origin/i)
      const exposed = String(res.headers['access-control-expose-headers']).split(', ')
      for (const header of [
        'link',
        'retry-after',
        'x-request-id',
        'www-authenticate',
        'ratelimit',
        'ratelimit-policy',
        'idempotent-replayed',
      ]) {
        assert.ok(exposed.includes(header), `${header} in ${exposed.join(', ')}`)
      }
    })

    test('answers an OPTIONS from an allowed origin that names no method as a preflight, never in plain text', async () => {
      const res = await t.app.inject({ method: 'OPTIONS', url: '/plants', headers: { origin: ALLOWED } })
      assert.equal(res.statusCode, 204)
      assert.equal(res.body, '')
      assert.equal(res.headers['access-control-allow-origin'], ALLOWED)
    })

    test("grants the answers made before authentication too: a bad head, a draining instance's 503", async () => {
      // An array is the header sent once per value (capitalised: Node's types allow an array under that name).
      const headers = bearer(await t.token('sent-twice'))
      const sentTwice: OutgoingHttpHeaders = { origin: ALLOWED, Authorization: [headers.authorization, 'Bearer x'] }
      const twice = await t.app.inject({ method: 'GET', url: '/plants', headers: sentTwice })
      assert.equal(twice.statusCode, 400)
      assert.equal(twice.json().error, 40004)
      assert.equal(twice.headers['access-control-allow-origin'], ALLOWED)
      lifecycle.draining = true
      try {
        const draining = await expectServerError(503, () =>
          t.app.inject({ method: 'GET', url: '/readyz', headers: { origin: ALLOWED } }),
        )
        assert.equal(draining.statusCode, 503)
        assert.equal(draining.headers['access-control-allow-origin'], ALLOWED)
        assert.match(String(draining.headers['access-control-expose-headers']), /retry-after/)
        assert.match(String(draining.headers.vary), /origin/i)
      } finally {
        lifecycle.draining = false
      }
    })

    test('grants error answers too, so a page can read why it was refused', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/plants', headers: { origin: 'https://app.example.com' } })
      assert.equal(res.statusCode, 401)
      assert.equal(res.json().error, 40101)
      assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com')
    })

    test('gives another origin no grant: its preflight is 404, its answers carry no Access-Control header', async () => {
      const refused = await preflight(t, OTHER)
      assert.equal(refused.statusCode, 404)
      assert.equal(refused.json().error, 40402)
      assert.deepEqual(accessControl(refused), [])
      const headers = bearer(await t.token('other-origin'))
      const res = await t.app.inject({ method: 'GET', url: '/plants', headers: { ...headers, origin: OTHER } })
      assert.equal(res.statusCode, 200)
      assert.deepEqual(accessControl(res), [])
      assert.match(String(res.headers.vary), /origin/i, 'a cache must not hand this answer to an allowed origin')
    })

    test('matches origins exactly: another scheme, port, case or a trailing slash is another origin', async () => {
      const others = ['https://127.0.0.1:5173', 'http://127.0.0.1:5174', `${ALLOWED}/`, ALLOWED.toUpperCase(), 'null']
      for (const origin of others) {
        assert.equal((await preflight(t, origin)).statusCode, 404, origin)
      }
    })
  })
}

describe('CORS when no origin is allowed (the default)', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(() => t.close())

  test('sends no CORS header at all, and a preflight is 404 like any OPTIONS', async () => {
    const refused = await preflight(t, ALLOWED)
    assert.equal(refused.statusCode, 404)
    assert.deepEqual(accessControl(refused), [])
    const res = await t.app.inject({
      method: 'GET',
      url: '/plants',
      headers: { ...bearer(await t.token('alice')), origin: ALLOWED },
    })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(accessControl(res), [])
    assert.equal(res.headers.vary, undefined)
  })
})
