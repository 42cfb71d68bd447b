import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { TokenVerifier } from '../../src/auth/token-cache.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { hashSecret, newTokenSecret } from '../../src/auth/tokens.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import { backends, freshStorage } from '../helpers/backends.js'

describe('token verifier', () => {
  let storage: InstrumentedStorage
  let dispose: () => Promise<void>
  let reads = 0
  const lookedUp: Buffer[] = []
  before(async () => {
    ;({ storage, dispose } = await freshStorage(backends[0]!))
    const find = storage.tokens.find.bind(storage.tokens)
    storage.tokens.find = (hash) => {
      reads++
      lookedUp.push(hash)
      return find(hash)
    }
  })
  after(() => dispose())

  async function create(): Promise<{ id: string; secret: string }> {
    const { secret, token } = await issueToken(storage, { accountName: 'a', scopes: ['plants:read'] })
    return { id: token.id, secret }
  }

  test('reads a known token from the database once per cache interval, not per request', async () => {
    const verifier = new TokenVerifier(storage.tokens, { ttlMs: 1000 })
    const { secret } = await create()
    reads = 0
    for (let i = 0; i < 5; i++) assert.equal((await verifier.verify(secret, 10_000 + i)).ok, true)
    assert.equal(reads, 1)
    await verifier.verify(secret, 11_001)
    assert.equal(reads, 2)
  })

  test('sees a revocation after the cache interval', async () => {
    const verifier = new TokenVerifier(storage.tokens, { ttlMs: 1000 })
    const { id, secret } = await create()
    assert.equal((await verifier.verify(secret, 20_000)).ok, true)
    await storage.tokens.revoke(id)
    assert.deepEqual(await verifier.verify(secret, 21_000), { ok: false, reason: 'revoked' })
  })

  test('does not cache unknown secrets, so a token created just now works at once', async () => {
    const verifier = new TokenVerifier(storage.tokens, { ttlMs: 60_000 })
    const secret = newTokenSecret()
    assert.deepEqual(await verifier.verify(secret), { ok: false, reason: 'unknown' })
    await issueToken(storage, { accountName: 'a', secret, scopes: [] })
    assert.equal((await verifier.verify(secret)).ok, true)
  })

  // What a wrong token costs must not depend on how much of a real one it matches. The database index and the
  // cache compare lookup keys, and those are SHA-256 digests of the whole secret: a guess right in all but its
  // last character shares no more of its key with the real one than a random guess does.
  test('looks a secret up by the SHA-256 of all of it, so a near miss shares nothing with the real key', async () => {
    const verifier = new TokenVerifier(storage.tokens, { ttlMs: 60_000 })
    const { secret } = await create()
    const real = hashSecret(secret)
    const flip = (c: string) => (c === 'A' ? 'B' : 'A')
    for (let kept = 4; kept < secret.length; kept++) {
      const guess = secret.slice(0, kept) + flip(secret[kept]!) + secret.slice(kept + 1)
      lookedUp.length = 0
      assert.deepEqual(await verifier.verify(guess), { ok: false, reason: 'unknown' })
      assert.equal(lookedUp.length, 1)
      const key = lookedUp[0]!
      assert.deepEqual(key, hashSecret(guess), 'the key is the digest of the whole guess')
      let shared = 0
      while (shared < key.length && key[shared] === real[shared]) shared++
      assert.ok(shared < 4, `a guess matching ${kept} characters shares ${shared} leading key bytes with the real one`)
    }
  })

  test('refuses a secret one character away from a cached one, asking the database by its own digest', async () => {
    const verifier = new TokenVerifier(storage.tokens, { ttlMs: 60_000 })
    const { secret } = await create()
    assert.equal((await verifier.verify(secret, 40_000)).ok, true)
    for (const guess of [secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A'), secret + 'A', secret.slice(0, -1)]) {
      lookedUp.length = 0
      assert.deepEqual(await verifier.verify(guess, 40_001), { ok: false, reason: 'unknown' })
      assert.deepEqual(lookedUp, [hashSecret(guess)])
    }
    assert.equal((await verifier.verify(secret, 40_002)).ok, true, 'the cached secret itself still passes')
  })

  test('keeps at most maxEntries tokens in memory', async () => {
    const verifier = new TokenVerifier(storage.tokens, { ttlMs: 60_000, maxEntries: 2 })
    const tokens = [await create(), await create(), await create()]
    for (const { secret } of tokens) await verifier.verify(secret, 30_000)
    reads = 0
    await verifier.verify(tokens[0]!.secret, 30_001)
    assert.equal(reads, 1, 'the oldest entry was evicted and read again')
    await verifier.verify(tokens[2]!.secret, 30_001)
    assert.equal(reads, 1, 'a recent entry is still cached')
  })
})
