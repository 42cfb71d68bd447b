import assert from 'node:assert/strict'
import type { OutgoingHttpHeaders } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'

const ROUTES = [
  { method: 'GET', url: '/plants', scope: 'plants:read' },
  { method: 'POST', url: '/plants', scope: 'plants:write' },
  { method: 'DELETE', url: '/plants/1', scope: 'plants:write' },
  { method: 'GET', url: '/plants/1', scope: 'plants:read' },
] as const

for (const backend of backends) {
  describe(`bearer authentication (${backend.name})`, () => {
    let t: TestApp
    before(async () => {
      t = await buildTestApp(backend, 100)
    })
    after(() => t.close())

    const call = (route: (typeof ROUTES)[number], headers: Record<string, string>) =>
      t.app.inject({
        method: route.method,
        url: route.url,
        headers: { 'content-type': 'application/json', ...headers },
        payload: route.method === 'POST' ? '{"id": 1, "name": "x"}' : undefined,
      })

    for (const route of ROUTES) {
      describe(`${route.method} ${route.url}`, () => {
        test('answers 401 with a realm challenge when no token is sent', async () => {
          const res = await call(route, {})
          assert.equal(res.statusCode, 401)
          assert.equal(res.headers['www-authenticate'], 'Bearer realm="plantstore"')
          assert.equal(res.json().error, 40101)
        })

        test('answers 401 without an error code for another scheme', async () => {
          const res = await call(route, { authorization: 'Basic YWxhZGRpbjpvcGVuc2VzYW1l' })
          assert.equal(res.statusCode, 401)
          assert.equal(res.headers['www-authenticate'], 'Bearer realm="plantstore"')
          assert.match(res.json().message, /Bearer scheme/)
        })

        for (const [what, header] of [
          ['a malformed token', 'Bearer has spaces in it'],
          ['an empty token', 'Bearer '],
          ['an unknown token', 'Bearer pst_' + 'A'.repeat(43)],
        ]) {
          test(`answers 401 invalid_token for ${what}`, async () => {
            const res = await call(route, { authorization: header! })
            assert.equal(res.statusCode, 401)
            assert.equal(res.headers['www-authenticate'], 'Bearer realm="plantstore", error="invalid_token"')
            assert.equal(res.json().error, 40102)
          })
        }

        test('answers 401 invalid_token for an expired token', async () => {
          const secret = await t.token('alice', { expiresAt: new Date(Date.now() - 1000) })
          const res = await call(route, bearer(secret))
          assert.equal(res.statusCode, 401)
          assert.match(res.headers['www-authenticate'] as string, /error="invalid_token"/)
          assert.equal(res.json().message, 'bearer token has expired')
        })

        test('answers 403 insufficient_scope naming the scope it needs', async () => {
          const other = route.scope === 'plants:read' ? 'plants:write' : 'plants:read'
          const secret = await t.token('alice', { scopes: [other] })
          const res = await call(route, bearer(secret))
          assert.equal(res.statusCode, 403)
          assert.equal(
            res.headers['www-authenticate'],
            `Bearer realm="plantstore", error="insufficient_scope", scope="${route.scope}"`,
          )
          assert.equal(res.json().error, 40301)
          assert.match(res.json().message, new RegExp(route.scope))
        })

        test('refuses a second Authorization header with 400 before either token is used', async () => {
          const secret = await t.token('alice', { scopes: [route.scope] })
          // An array is the header sent once per value (capitalised: Node's types allow an array under that name).
          const headers: OutgoingHttpHeaders = {
            'content-type': 'application/json',
            Authorization: [`Bearer ${secret}`, 'Bearer pst_other'],
          }
          const res = await t.app.inject({
            method: route.method,
            url: route.url,
            headers,
            payload: route.method === 'POST' ? '{"id": 1, "name": "x"}' : undefined,
          })
          assert.equal(res.statusCode, 400)
          assert.deepEqual(res.json(), { error: 40004, message: 'Authorization: sent more than once; send it once' })
        })

        test('lets a token with the scope through', async () => {
          // An account of the test's own holding plant 1, so the request's answer is known: listed, read, created
          // again as it is (200) or deleted (204).
          const account = `through-${route.method.toLowerCase()}-${route.url}`
          const writer = await t.token(account, { scopes: ['plants:write'] })
          assert.equal((await call(ROUTES[1], bearer(writer))).statusCode, 200)
          const secret = await t.token(account, { scopes: [route.scope] })
          const res = await call(route, bearer(secret))
          assert.equal(res.statusCode, { GET: 200, POST: 200, DELETE: 204 }[route.method], res.body)
          if (route.url === '/plants/1' && route.method === 'GET') assert.deepEqual(res.json(), { name: 'x' })
          else if (route.method === 'GET') assert.deepEqual(res.json(), [{ name: 'x' }])
        })
      })
    }

    test('accepts the scheme name in any case', async () => {
      const secret = await t.token('alice')
      const res = await t.app.inject({ method: 'GET', url: '/plants', headers: { authorization: `bEaReR ${secret}` } })
      assert.equal(res.statusCode, 200)
    })

    test('works until expiry, then refuses the token', async (c) => {
      // The test moves the clock instead of racing it: a token expiring 300 ms after it was written could expire
      // before its first use on a loaded machine. Only Date is mocked; timers and I/O run as usual.
      c.mock.timers.enable({ apis: ['Date'], now: Date.now() })
      const secret = await t.token('alice', { expiresAt: new Date(Date.now() + 60_000) })
      const get = () => t.app.inject({ method: 'GET', url: '/plants', headers: bearer(secret) })
      assert.equal((await get()).statusCode, 200)
      c.mock.timers.tick(59_000)
      assert.equal((await get()).statusCode, 200, 'still before its expiry')
      c.mock.timers.tick(1000)
      const res = await get()
      assert.equal(res.statusCode, 401)
      assert.equal(res.json().message, 'bearer token has expired')
    })

    test('refuses a revoked token once the cache interval has passed', async () => {
      const secret = await t.token('alice')
      const get = () => t.app.inject({ method: 'GET', url: '/plants', headers: bearer(secret) })
      assert.equal((await get()).statusCode, 200)
      const [token] = (await t.storage.tokens.list('alice')).slice(-1)
      assert.ok(await t.storage.tokens.revoke(token!.id))
      await sleep(150)
      const res = await get()
      assert.equal(res.statusCode, 401)
      assert.equal(res.json().message, 'bearer token has been revoked')
    })

    test('does not pass the caller through to public routes', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/healthz' })
      assert.equal(res.statusCode, 200)
    })
  })
}
