import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { PassThrough } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import { parseRate } from '../../src/limits/rate.js'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { AUDIENCE, JwksServer, signingKey, type SigningKey } from '../helpers/jwks-server.js'

const CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'
const ALL = 'plants:read plants:write webhooks:manage tokens:manage'
const b64 = (value: object | string) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')

describe('JWT access tokens, keys from a bare JWKS server', () => {
  let jwks: JwksServer
  let key: SigningKey
  let t: TestApp
  const logs: string[] = []
  // The key set's cooldown runs on this clock, which only the tests move: a fetch falls due exactly when one moves
  // it past the cooldown, never by the time a slow machine takes.
  const COOLDOWN_MS = 30_000
  let clock = 0
  before(async () => {
    key = await signingKey('k1')
    jwks = await JwksServer.start([key, await signingKey('k2', 'ES256'), await signingKey('k3', 'EdDSA')])
    const stream = new PassThrough()
    stream.on('data', (line: Buffer) => logs.push(line.toString()))
    const keys = { cooldownMs: COOLDOWN_MS, timeoutMs: 1000, now: () => clock }
    t = await buildTestApp(undefined, 2000, undefined, {
      jwt: jwks.settings({ keys }),
      logger: { level: 'info', stream },
    })
  })
  after(async () => {
    await t.close()
    await jwks.stop()
  })

  const list = (token: string) => t.app.inject({ method: 'GET', url: '/plants', headers: bearer(token) })
  const sign = (claims: object = {}, header: Record<string, unknown> = {}, with_: SigningKey = key) =>
    jwks.sign(with_, { sub: 'alice', scope: ALL, ...claims }, header)

  async function assertRefused(token: string, message = 'bearer token is not valid') {
    const res = await list(token)
    assert.equal(res.statusCode, 401, res.body)
    assert.equal(res.headers['www-authenticate'], CHALLENGE)
    assert.deepEqual(res.json(), { error: 40102, message })
  }

  test('accepts a token signed by a published key with RS256, ES256 or EdDSA', async () => {
    for (const published of jwks.published) {
      const res = await list(await sign({}, {}, published))
      assert.equal(res.statusCode, 200, `${published.alg}: ${res.body}`)
    }
  })

  test('creates the account named by the sub claim on first use, and keeps it to that account', async () => {
    const carol = await sign({ sub: 'carol' })
    const created = await t.app.inject({
      method: 'POST',
      url: '/plants',
      headers: { ...bearer(carol), 'content-type': 'application/json' },
      payload: { id: 1, name: 'Fern' },
    })
    assert.equal(created.statusCode, 200)
    assert.deepEqual((await list(carol)).json(), [{ name: 'Fern' }])
    assert.deepEqual((await list(await sign({ sub: 'dave' }))).json(), [])
    assert.equal((await t.storage.tokens.list('carol')).length, 0, 'no token is stored for a JWT caller')
  })

  test('shares the account with the service tokens of the same name', async () => {
    const opaque = await t.token('erin')
    await t.app.inject({
      method: 'POST',
      url: '/plants',
      headers: { ...bearer(opaque), 'content-type': 'application/json' },
      payload: { id: 2, name: 'Ivy' },
    })
    assert.deepEqual((await list(await sign({ sub: 'erin' }))).json(), [{ name: 'Ivy' }])
  })

  test('accepts typ JWT as well as at+jwt, and scopes from an scp array', async () => {
    assert.equal((await list(await sign({}, { typ: 'JWT' }))).statusCode, 200)
    assert.equal((await list(await sign({ scope: undefined, scp: ['plants:read'] }))).statusCode, 200)
  })

  test('answers 403 insufficient_scope when the token does not grant the route’s scope; unknown scopes grant nothing', async () => {
    const res = await list(await sign({ scope: 'plants:write plants:admin openid' }))
    assert.equal(res.statusCode, 403)
    assert.equal(
      res.headers['www-authenticate'],
      'Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"',
    )
    assert.equal(res.json().error, 40301)
  })

  test('refuses a wrong iss with 401 invalid_token', async () =>
    assertRefused(await sign({ iss: 'https://evil.example' })))
  test('refuses a wrong aud', async () => assertRefused(await sign({ aud: 'https://other.test' })))
  test('accepts aud as an array holding the audience', async () =>
    assert.equal((await list(await sign({ aud: ['https://other.test', AUDIENCE] }))).statusCode, 200))
  test('refuses a token without exp', async () => assertRefused(await sign({ exp: undefined })))

  test('refuses an expired token, past the 30 s tolerance, saying it has expired', async () => {
    const now = Math.floor(Date.now() / 1000)
    await assertRefused(await sign({ iat: now - 600, exp: now - 31 }), 'bearer token has expired')
    assert.equal((await list(await sign({ iat: now - 600, exp: now - 10 }))).statusCode, 200, 'within the tolerance')
  })

  test('refuses a token not yet valid (nbf), and one issued in the future (iat), past the tolerance', async () => {
    const now = Math.floor(Date.now() / 1000)
    await assertRefused(await sign({ nbf: now + 60 }))
    await assertRefused(await sign({ iat: now + 60 }))
    assert.equal((await list(await sign({ nbf: now + 10, iat: now + 10 }))).statusCode, 200, 'within the tolerance')
  })

  test('refuses a typ other than at+jwt or JWT, and a header without typ', async () => {
    await assertRefused(await sign({}, { typ: 'id_token+jwt' }))
    await assertRefused(await sign({}, { typ: undefined }))
  })

  test('refuses alg none', async () => {
    const now = Math.floor(Date.now() / 1000)
    const claims = { iss: jwks.issuer, aud: AUDIENCE, sub: 'alice', scope: ALL, iat: now, exp: now + 300 }
    await assertRefused(`${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claims)}.x`)
    await assertRefused(`${b64({ alg: 'none', typ: 'at+jwt', kid: 'k1' })}.${b64(claims)}.${b64('')}A`)
  })

  test('refuses a token signed with HMAC using the public key as the secret', async () => {
    const now = Math.floor(Date.now() / 1000)
    const claims = { iss: jwks.issuer, aud: AUDIENCE, sub: 'alice', scope: ALL, iat: now, exp: now + 300 }
    const input = `${b64({ alg: 'HS256', typ: 'at+jwt', kid: 'k1' })}.${b64(claims)}`
    for (const secret of [JSON.stringify(key.jwk), String(key.jwk.n)]) {
      await assertRefused(`${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`)
    }
  })

  test('refuses a tampered payload', async () => {
    const [header, , signature] = (await sign()).split('.')
    const forged = await sign({ sub: 'mallory' })
    await assertRefused(`${header}.${forged.split('.')[1]}.${signature}`)
  })

  test('refuses a token whose kid is not published, and one signed by an unpublished key under a published kid', async () => {
    const stranger = await signingKey('k9')
    await assertRefused(await sign({}, {}, stranger))
    await assertRefused(await sign({}, {}, { ...stranger, kid: 'k1' }))
  })

  test('refuses a token without the account claim, or with one that is not a usable name', async () => {
    await assertRefused(await sign({ sub: undefined }))
    await assertRefused(await sign({ sub: 42 }))
    await assertRefused(await sign({ sub: 'line\nbreak' }))
    await assertRefused(await sign({ sub: 'x'.repeat(256) }))
    // A lone surrogate would be stored as U+FFFD by PostgreSQL: "victim\ud800" would be the account "victim\ufffd".
    await assertRefused(await sign({ sub: 'victim\ud800' }))
    await assertRefused(await sign({ sub: 'private\ue000' }))
  })

  test('accepts a JWT of over 4 KiB, as a provider sends with hundreds of groups', async () => {
    const groups = Array.from({ length: 300 }, (_, i) => `group-${i}`)
    const token = await sign({ groups })
    assert.ok(token.length > 5000, `${token.length} characters`)
    assert.equal((await list(token)).statusCode, 200)
  })

  test('tries each key that fits a token without a distinguishing kid, and accepts the one that signed it', async () => {
    const [first, second] = [await signingKey('twin', 'ES256'), await signingKey('twin', 'ES256')]
    const saved = jwks.published
    jwks.published = [...saved, first, second]
    try {
      clock += COOLDOWN_MS // the twins' kid, unknown till now, fetches the keys again
      assert.equal((await list(await sign({ jti: 'twin 2' }, {}, second))).statusCode, 200)
      assert.equal((await list(await sign({ jti: 'twin 1' }, {}, first))).statusCode, 200)
      await assertRefused(await sign({ jti: 'twin ?' }, {}, await signingKey('twin', 'ES256')))
    } finally {
      jwks.published = saved
    }
  })

  test('still accepts the service’s own pst_ tokens beside JWTs', async () => {
    assert.equal((await list(await t.token('frank'))).statusCode, 200)
  })

  test('accepts a new key published after start, and refuses the old one removed, without a restart', async () => {
    const next = await signingKey('k4', 'ES256')
    const old = jwks.published[0]!
    jwks.published = [next, ...jwks.published.slice(1)]
    clock += COOLDOWN_MS // the new kid fetches the keys again
    assert.equal((await list(await sign({ jti: 'rotated' }, {}, next))).statusCode, 200)
    await assertRefused(await sign({ jti: 'old key' }, {}, old))
    jwks.published = [old, ...jwks.published]
  })

  test('asks the JWKS server at most once per cooldown however many unknown kids arrive, and again once it ends', async () => {
    clock += COOLDOWN_MS // past the fetches of the tests before: the first unknown kid may fetch
    const before = jwks.requests
    const strangers = await Promise.all(Array.from({ length: 5 }, (_, i) => signingKey(`flood${i}`, 'ES256')))
    const flood = (jti: string) =>
      Promise.all(strangers.map(async (stranger) => assertRefused(await sign({ jti }, {}, stranger))))
    for (let round = 0; round < 4; round++) await flood(`f${round}`)
    assert.equal(jwks.requests - before, 1, 'the first unknown kid fetches, the rest wait for the cooldown')
    clock += COOLDOWN_MS - 1
    await flood('just before')
    assert.equal(jwks.requests - before, 1, 'not a millisecond early')
    clock += 1
    await flood('at the end')
    assert.equal(jwks.requests - before, 2, 'one fetch as the cooldown ends, however many kids ask at once')
  })

  test('with the JWKS server down: known keys keep working, unknown ones get 401, readiness holds, logged once', async () => {
    assert.equal((await list(await sign({ jti: 'before outage' }))).statusCode, 200, 'the keys are at hand')
    logs.length = 0
    await jwks.stop()
    try {
      assert.equal((await list(await sign({ jti: 'during outage' }))).statusCode, 200)
      // Each unknown kid past the cooldown tries the server again: three failed fetches, one outage.
      for (let i = 0; i < 3; i++) {
        clock += COOLDOWN_MS
        await assertRefused(await sign({ jti: `o${i}` }, {}, await signingKey(`gone${i}`, 'ES256')))
      }
      assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
      const outage = logs.filter((line) => line.includes('JWT signing keys cannot be fetched'))
      assert.equal(outage.length, 1, logs.join(''))
      assert.doesNotMatch(logs.join(''), /eyJ/, 'no token is logged')
    } finally {
      await jwks.resume()
    }
    const before = jwks.requests
    clock += COOLDOWN_MS
    await assertRefused(await sign({ jti: 'back' }, {}, await signingKey('still-unknown', 'ES256')))
    assert.equal(jwks.requests - before, 1, 'the server is asked again')
    assert.equal(logs.filter((line) => line.includes('can be fetched again')).length, 1)
  })
})

describe('JWT access tokens and the limits', () => {
  let jwks: JwksServer
  let key: SigningKey
  let t: TestApp
  before(async () => {
    key = await signingKey('k1')
    jwks = await JwksServer.start([key])
    t = await buildTestApp(undefined, 2000, undefined, {
      jwt: jwks.settings({ accountClaim: 'account' }),
      rateLimit: { perToken: parseRate('3/min'), perAccount: parseRate('5/min'), authFailures: parseRate('3/min') },
    })
  })
  after(async () => {
    await t.close()
    await jwks.stop()
  })
  const list = (token: string, ip = '127.0.0.1') =>
    t.app.inject({ method: 'GET', url: '/plants', headers: bearer(token), remoteAddress: ip })

  test('counts refused JWTs toward the per-address failed-authentication limit', async () => {
    const bad = await jwks.sign(key, { account: 'a', scope: 'plants:read', aud: 'https://other.test' })
    for (let i = 0; i < 3; i++) assert.equal((await list(bad, '10.0.0.1')).statusCode, 401)
    const res = await list(bad, '10.0.0.1')
    assert.equal(res.statusCode, 429)
    assert.equal(res.json().error, 42901)
    assert.equal((await list(bad, '10.0.0.2')).statusCode, 401, 'another address is not limited')
  })

  test('rate-limits each subject on its own, whichever of its tokens it sends, and the account as a whole', async () => {
    const of = (sub: string, jti: string, account = 'shared') =>
      jwks.sign(key, { sub, scope: 'plants:read', jti, account })
    for (let i = 0; i < 3; i++) assert.equal((await list(await of('s1', `a${i}`))).statusCode, 200)
    const subject = await list(await of('s1', 'a3'))
    assert.equal(subject.statusCode, 429, 'a fresh token of the same subject')
    assert.match(subject.json().message, /^rate limit of 3 requests/)
    // The refused request did not count for the account: s2's two are its fourth and fifth.
    assert.equal((await list(await of('s2', 'b0'))).statusCode, 200, 'another subject, the account’s fourth request')
    assert.equal((await list(await of('s2', 'b1'))).statusCode, 200, 'the account’s fifth')
    const account = await list(await of('s2', 'b2'))
    assert.equal(account.statusCode, 429, 'the account’s sixth')
    assert.match(account.json().message, /^the account's rate limit of 5 requests/)
    assert.equal((await list(await of('s3', 'c0', 'elsewhere'))).statusCode, 200, 'another account')
  })

  test('keeps the subjects of two accounts apart when they share a sub, or a sub names the other account', async () => {
    const as = (account: string, sub: string | undefined, jti: string) =>
      jwks.sign(key, { ...(sub === undefined ? {} : { sub }), scope: 'plants:read', jti, account })
    for (let i = 0; i < 3; i++) assert.equal((await list(await as('acme', 'shared-user', `a${i}`))).statusCode, 200)
    assert.equal((await list(await as('acme', 'shared-user', 'a3'))).statusCode, 429, 'acme’s shared-user is out')
    const other = await list(await as('globex', 'shared-user', 'g0'))
    assert.equal(other.statusCode, 200, 'globex’s shared-user has a budget of its own')
    assert.match(String(other.headers.ratelimit), /^"token";r=2;t=\d+, /)
    // Without sub, a JWT's subject is its account's name.
    for (let i = 0; i < 3; i++) assert.equal((await list(await as('initech', undefined, `i${i}`))).statusCode, 200)
    assert.equal((await list(await as('initech', undefined, 'i3'))).statusCode, 429)
    assert.equal((await list(await as('umbrella', 'initech', 'u0'))).statusCode, 200, 'a sub naming another account')
  })
})

describe('JWT-shaped bearer values when no issuer is configured', () => {
  test('are looked up as service tokens and refused with 401', async () => {
    const key = await signingKey('k1')
    const jwks = await JwksServer.start([key])
    const t = await buildTestApp()
    try {
      const res = await t.app.inject({
        method: 'GET',
        url: '/plants',
        headers: bearer(await jwks.sign(key, { sub: 'alice', scope: ALL })),
      })
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['www-authenticate'], CHALLENGE)
      assert.equal(jwks.requests, 0)
    } finally {
      await t.close()
      await jwks.stop()
    }
  })
})
