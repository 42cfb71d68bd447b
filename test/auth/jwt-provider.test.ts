import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { AUDIENCE } from '../helpers/jwks-server.js'
import { startIdp, type TestIdp } from '../helpers/oidc-provider.js'

const ALL = ['plants:read', 'plants:write', 'webhooks:manage', 'tokens:manage']

for (const backend of backends) {
  describe(`JWT access tokens from a real OpenID provider, client credentials (${backend.name})`, () => {
    let idp: TestIdp
    let t: TestApp
    before(async () => {
      idp = await startIdp({ audience: AUDIENCE, clients: ['gardener', 'reader', 'neighbour'] })
      // No JWKS URL: the keys are found through the issuer's /.well-known/openid-configuration.
      const jwt = {
        issuer: idp.issuer,
        audience: AUDIENCE,
        accountClaim: 'sub',
        algorithms: ['RS256', 'ES256', 'EdDSA'],
        clockToleranceSeconds: 30,
      }
      t = await buildTestApp(backend, 2000, undefined, { jwt, webhooks: { allowPrivate: true } })
    })
    after(async () => {
      await t.close()
      await idp.close()
    })

    const call = (token: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
      t.app.inject({
        method,
        url,
        headers: { ...bearer(token), ...(payload && { 'content-type': 'application/json' }) },
        ...(payload && { payload }),
      })

    test('works on every route with the scopes it was granted', async () => {
      const token = await idp.token({ clientId: 'gardener', scopes: ALL })
      assert.equal((await call(token, 'POST', '/plants', { id: 1, name: 'Monstera', tag: 'tropical' })).statusCode, 200)
      assert.deepEqual((await call(token, 'GET', '/plants')).json(), [{ name: 'Monstera', tag: 'tropical' }])
      assert.equal((await call(token, 'DELETE', '/plants/1')).statusCode, 204)

      const hook = await call(token, 'POST', '/webhooks', { url: 'http://127.0.0.1:9/hook' })
      assert.equal(hook.statusCode, 201, hook.body)
      assert.equal((await call(token, 'GET', '/webhooks')).json().length, 1)
      assert.equal((await call(token, 'DELETE', `/webhooks/${hook.json().id}`)).statusCode, 204)

      const made = await call(token, 'POST', '/tokens', { scopes: ['plants:read'], label: 'from the IdP' })
      assert.equal(made.statusCode, 201, made.body)
      await call(token, 'POST', '/plants', { id: 2, name: 'Fern' })
      assert.deepEqual(
        (await call(made.json().secret, 'GET', '/plants')).json(),
        [{ name: 'Fern' }],
        'a token made by a JWT caller belongs to its account',
      )
      assert.deepEqual(
        (await call(token, 'GET', '/tokens')).json().map((listed: { label: string }) => listed.label),
        ['from the IdP'],
      )
      assert.equal((await call(token, 'DELETE', `/tokens/${made.json().id}`)).statusCode, 204)
    })

    test('answers 403 insufficient_scope on each route whose scope was not granted', async () => {
      const token = await idp.token({ clientId: 'reader', scopes: ['plants:read'] })
      assert.equal((await call(token, 'GET', '/plants')).statusCode, 200)
      const refused: Array<[string, 'GET' | 'POST' | 'DELETE', string, object?]> = [
        ['plants:write', 'POST', '/plants', { id: 1, name: 'x' }],
        ['plants:write', 'DELETE', '/plants/1'],
        ['webhooks:manage', 'GET', '/webhooks'],
        ['tokens:manage', 'GET', '/tokens'],
        ['tokens:manage', 'POST', '/tokens', { scopes: ['plants:read'] }],
      ]
      for (const [scope, method, url, payload] of refused) {
        const res = await call(token, method, url, payload)
        assert.equal(res.statusCode, 403, `${method} ${url}`)
        assert.equal(
          res.headers['www-authenticate'],
          `Bearer realm="plantstore", error="insufficient_scope", scope="${scope}"`,
        )
      }
    })

    test('lets a JWT caller make tokens only with its own scopes, none that outlives it, recording no maker', async () => {
      const token = await idp.token({ clientId: 'gardener', scopes: ['plants:read', 'tokens:manage'] })
      const lacking = await call(token, 'POST', '/tokens', { scopes: ['plants:read', 'plants:write'] })
      assert.equal(lacking.statusCode, 403)
      assert.equal(
        lacking.headers['www-authenticate'],
        'Bearer realm="plantstore", error="insufficient_scope", scope="plants:write"',
      )
      const made = await call(token, 'POST', '/tokens', { scopes: ['plants:read'] })
      assert.equal(made.statusCode, 201)
      assert.equal(made.json().createdBy, null, 'a JWT is no stored token: what it makes records no maker')
      const exp = (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp
      assert.equal(Date.parse(made.json().expiresAt), exp * 1000, 'the JWT’s own expiry, not 90 days')
      assert.equal((await call(token, 'DELETE', `/tokens/${made.json().id}`)).statusCode, 204)
    })

    test('keeps each client to its own account', async () => {
      const neighbour = await idp.token({ clientId: 'neighbour', scopes: ALL })
      assert.deepEqual((await call(neighbour, 'GET', '/plants')).json(), [])
      assert.equal((await call(neighbour, 'DELETE', '/plants/2')).statusCode, 404)
    })

    test('refuses a token the provider issued for another audience with 401 invalid_token', async () => {
      const token = await idp.token({ clientId: 'gardener', scopes: ALL, audience: 'https://elsewhere.test' })
      const res = await call(token, 'GET', '/plants')
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="plantstore", error="invalid_token"')
    })
  })
}
