import assert from 'node:assert/strict'
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { jwtVerify } from 'jose'
import { KeySet } from '../../src/auth/jwks.js'
import { JwtVerifier } from '../../src/auth/jwt.js'
import { AUDIENCE, JwksServer, signingKey, type SigningKey } from '../helpers/jwks-server.js'

type Mode = 'good' | 'huge' | 'huge-declared' | 'redirect' | 'trickle' | 'error' | 'not-json' | 'other-issuer'

/** A key endpoint and discovery document that misbehave as told. */
class Provider {
  mode: Mode = 'good'
  requests = 0
  keys: SigningKey[] = []
  server!: Server
  get issuer() {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.requests++
      if (req.url === '/.well-known/openid-configuration') {
        const issuer = this.mode === 'other-issuer' ? 'https://elsewhere.example' : this.issuer
        return void res.end(JSON.stringify({ issuer, jwks_uri: `${this.issuer}/jwks` }))
      }
      this.answer(res)
    })
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve))
  }

  answer(res: ServerResponse): void {
    const jwks = JSON.stringify({ keys: this.keys.map((key) => key.jwk) })
    switch (this.mode) {
      case 'huge':
        // No Content-Length: the size shows only while reading.
        res.write(jwks.slice(0, -1) + ', "padding": "')
        for (let i = 0; i < 2048; i++) res.write('x'.repeat(1024))
        return void res.end('"}')
      case 'huge-declared':
        res.setHeader('content-length', String(2 * 1024 * 1024))
        return void res.write('{')
      case 'redirect':
        res.statusCode = 302
        res.setHeader('location', `${this.issuer}/jwks`)
        return void res.end()
      case 'trickle':
        res.setHeader('content-type', 'application/json')
        return void res.write('{"keys": [')
      case 'error':
        res.statusCode = 503
        return void res.end('{}')
      case 'not-json':
        return void res.end('<html>')
      default:
        res.end(jwks)
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(resolve))
  }
}

describe('the signing keys, fetched from a provider that misbehaves', () => {
  const provider = new Provider()
  let key: SigningKey
  let signer: JwksServer
  before(async () => {
    key = await signingKey('k1')
    provider.keys = [key]
    await provider.start()
    // Only for its sign(); its own key endpoint is not used.
    signer = await JwksServer.start([])
  })
  after(async () => {
    await provider.stop()
    await signer.stop()
  })

  // Each key set's cooldown and age run on this clock, which only the tests move: a fetch falls due when one moves
  // it past the cooldown (30 s, the default), never by the time a slow machine takes.
  let clock = 0
  const COOLDOWN_MS = 30_000
  const verifies = async (keys: KeySet) => {
    const token = await signer.sign(key, { iss: provider.issuer, sub: 'a' })
    return jwtVerify(token, keys.getKey, { audience: AUDIENCE }).then(
      () => true,
      () => false,
    )
  }

  for (const mode of ['huge', 'huge-declared', 'redirect', 'trickle', 'error', 'not-json'] as const) {
    test(`refuses keys from an answer that is ${mode}, logs the outage once, and recovers when the provider does`, async () => {
      provider.mode = mode
      const outages: string[] = []
      const keys = new KeySet({
        issuer: provider.issuer,
        jwksUrl: `${provider.issuer}/jwks`,
        timeoutMs: 300,
        onOutage: (err) => outages.push((err as Error).message),
        now: () => clock,
      })
      const before = provider.requests
      assert.equal(await verifies(keys), false)
      clock += COOLDOWN_MS
      assert.equal(await verifies(keys), false)
      assert.equal(provider.requests - before, 2, 'two fetches failed')
      assert.equal(outages.length, 1, outages.join('\n'))
      provider.mode = 'good'
      clock += COOLDOWN_MS
      assert.equal(await verifies(keys), true)
    })
  }

  test('finds the key set through discovery, and refuses a discovery document naming another issuer', async () => {
    provider.mode = 'other-issuer'
    const outages: string[] = []
    const keys = new KeySet({ issuer: provider.issuer, onOutage: (err) => outages.push(String(err)), now: () => clock })
    assert.equal(await verifies(keys), false)
    assert.match(outages[0]!, /names issuer "https:\/\/elsewhere.example"/)
    provider.mode = 'good'
    clock += COOLDOWN_MS
    assert.equal(await verifies(keys), true)
  })

  test('refuses to fetch keys over plain http from anything but a loopback address', async () => {
    const outages: string[] = []
    const keys = new KeySet({
      issuer: 'http://127.evil.example',
      cooldownMs: 100,
      onOutage: (err) => outages.push(String(err)),
    })
    const before = provider.requests
    assert.equal(await verifies(keys), false)
    assert.match(outages[0]!, /not https, nor a loopback address/)
    assert.equal(provider.requests, before)
  })

  test('fetches keys older than their maximum age again in the background, using the old ones meanwhile', async () => {
    // Only the test moves the clock, so no fetch can fall due while it waits for the background one, however long
    // that takes: the cooldown (shorter than the maximum age) admits exactly one.
    provider.mode = 'good'
    const keys = new KeySet({
      issuer: provider.issuer,
      jwksUrl: `${provider.issuer}/jwks`,
      maxAgeMs: 600_000,
      cooldownMs: 60_000,
      now: () => clock,
    })
    assert.equal(await verifies(keys), true)
    const fetched = provider.requests
    clock += 600_000
    const removed = provider.keys
    provider.keys = []
    try {
      assert.equal(await verifies(keys), true, 'the old keys serve the request that starts the fetch')
      // Each try meets the old keys until the background fetch has replaced them; 10 s of tries is a bound only a
      // fetch that never ends reaches.
      let tries = 0
      while (await verifies(keys)) {
        assert.ok(++tries < 1000, 'the old keys are still in use 10 s after the background fetch began')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      assert.equal(provider.requests, fetched + 1, 'one background fetch')
    } finally {
      provider.keys = removed
    }
  })
})

describe('verified JWTs, remembered', () => {
  test('are trusted again without verifying for up to a minute, never past their exp', async () => {
    const key = await signingKey('k1')
    const jwks = await JwksServer.start([key])
    try {
      const settings = jwks.settings()
      const verifier = new JwtVerifier(settings, new KeySet({ issuer: jwks.issuer, jwksUrl: jwks.url }))
      const now = Math.floor(Date.now() / 1000)
      const token = await jwks.sign(key, { sub: 'a', exp: now + 30 })
      assert.equal((await verifier.verify(token)).ok, true)
      assert.equal(verifier.cached(token)?.ok, true)
      assert.equal(verifier.cached(token, (now + 30) * 1000), undefined, 'not at its exp')
      const long = await jwks.sign(key, { sub: 'a', exp: now + 3600 })
      await verifier.verify(long)
      assert.equal(verifier.cached(long, Date.now() + 59_000)?.ok, true)
      assert.equal(verifier.cached(long, Date.now() + 61_000), undefined, 'not past a minute')
    } finally {
      await jwks.stop()
    }
  })
})
