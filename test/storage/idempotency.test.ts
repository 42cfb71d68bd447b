import assert from 'node:assert/strict'
import { createHash, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import { openStorage, type InstrumentedStorage } from '../../src/storage/index.js'
import { NO_LIMITS, QuotaExceededError, type KeyClaim } from '../../src/storage/types.js'
import { backends, freshStorage } from '../helpers/backends.js'

const QUOTA = 3
const HOUR = 3_600_000
const digest = (text: string) => createHash('sha256').update(text).digest()

for (const backend of backends) {
  describe(`idempotency keys in storage (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let url: string
    let dispose: () => Promise<void>
    let accounts = 0
    before(async () => {
      ;({ storage, url, dispose } = await freshStorage(backend, {
        migrate: true,
        limits: { ...NO_LIMITS, idempotencyKeysPerAccount: QUOTA },
      }))
    })
    after(() => dispose())

    const account = async () => storage.tokens.accountId(`keys${++accounts}`)
    const claimOf = (accountId: number, key: string, request = 'A', more: Partial<KeyClaim> = {}): KeyClaim => ({
      accountId,
      key,
      fingerprint: digest(request),
      lease: randomUUID(),
      ttlMs: HOUR,
      leaseMs: HOUR,
      ...more,
    })

    test('a first claim holds the key; the same request again finds it running, another request a mismatch', async () => {
      const id = await account()
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k')), { state: 'claimed' })
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k')), { state: 'running' })
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k', 'B')), { state: 'mismatch' })
    })

    test('a completed claim is replayed to the same request, status and body, and refused to another', async () => {
      const id = await account()
      const first = claimOf(id, 'k')
      await storage.idempotency.claim(first)
      await storage.idempotency.complete(id, 'k', first.lease, 201, '{"made":1}')
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k')), {
        state: 'done',
        status: 201,
        body: '{"made":1}',
      })
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k', 'B')), { state: 'mismatch' })
    })

    test('keys are per account: the same key in two accounts is two keys', async () => {
      const [a, b] = [await account(), await account()]
      assert.equal((await storage.idempotency.claim(claimOf(a, 'shared'))).state, 'claimed')
      assert.equal((await storage.idempotency.claim(claimOf(b, 'shared', 'B'))).state, 'claimed')
    })

    test('only the claim holding the lease completes or releases the key', async () => {
      const id = await account()
      const first = claimOf(id, 'k')
      await storage.idempotency.claim(first)
      await storage.idempotency.complete(id, 'k', 'another lease', 200, 'forged')
      await storage.idempotency.release(id, 'k', 'another lease')
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k')), { state: 'running' })
    })

    test('a released key is free again, for any request', async () => {
      const id = await account()
      const first = claimOf(id, 'k')
      await storage.idempotency.claim(first)
      await storage.idempotency.release(id, 'k', first.lease)
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k', 'B')), { state: 'claimed' })
    })

    test('a lapsed lease is taken over by the same request, not by another', async () => {
      const id = await account()
      const stale = claimOf(id, 'k', 'A', { leaseMs: 1 })
      await storage.idempotency.claim(stale)
      await sleep(20)
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k', 'B')), { state: 'mismatch' })
      const retry = claimOf(id, 'k')
      assert.deepEqual(await storage.idempotency.claim(retry), { state: 'claimed' })
      // The stalled first request finishes late: its answer is not kept over the retry's claim.
      await storage.idempotency.complete(id, 'k', stale.lease, 200, 'late')
      await storage.idempotency.complete(id, 'k', retry.lease, 200, 'retry')
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k')), { state: 'done', status: 200, body: 'retry' })
    })

    test('an expired key is free for any request, never replayed, and purged', async () => {
      const id = await account()
      const first = claimOf(id, 'k', 'A', { ttlMs: 1 })
      await storage.idempotency.claim(first)
      await storage.idempotency.complete(id, 'k', first.lease, 200, 'old')
      const gone = claimOf(id, 'gone', 'A', { ttlMs: 1 })
      await storage.idempotency.claim(gone)
      await sleep(20)
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'k', 'B')), { state: 'claimed' })
      assert.ok((await storage.idempotency.purgeExpired(100)) >= 1)
      assert.equal(await storage.idempotency.purgeExpired(100), 0)
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'gone', 'B')), { state: 'claimed' })
    })

    test('an account holding its quota of keys gets QuotaExceededError for a new one, but may reuse its own', async () => {
      const id = await account()
      for (let i = 0; i < QUOTA; i++) await storage.idempotency.claim(claimOf(id, `q${i}`))
      await assert.rejects(storage.idempotency.claim(claimOf(id, 'one more')), (err: unknown) => {
        assert.ok(err instanceof QuotaExceededError)
        assert.equal(err.resource, 'idempotency keys')
        assert.equal(err.limit, QUOTA)
        return true
      })
      assert.deepEqual(await storage.idempotency.claim(claimOf(id, 'q0')), { state: 'running' })
      assert.equal((await storage.idempotency.claim(claimOf(await account(), 'other account'))).state, 'claimed')
    })

    test('released and purged keys give their room back to the quota', async () => {
      const id = await account()
      const claims = Array.from({ length: QUOTA }, (_, i) => claimOf(id, `r${i}`, 'A', { ttlMs: i === 0 ? 1 : HOUR }))
      for (const claim of claims) await storage.idempotency.claim(claim)
      await storage.idempotency.release(id, 'r1', claims[1]!.lease)
      assert.equal((await storage.idempotency.claim(claimOf(id, 'after release'))).state, 'claimed')
      await sleep(20)
      await storage.idempotency.purgeExpired(1000)
      assert.equal((await storage.idempotency.claim(claimOf(id, 'after purge'))).state, 'claimed')
      await assert.rejects(storage.idempotency.claim(claimOf(id, 'over')), QuotaExceededError)
    })

    test('a kept answer survives closing and opening the store again', async () => {
      const id = await account()
      const first = claimOf(id, 'durable')
      await storage.idempotency.claim(first)
      await storage.idempotency.complete(id, 'durable', first.lease, 200, '{"kept":true}')
      const again = await openStorage(url, { migrate: false })
      try {
        assert.deepEqual(await again.idempotency.claim(claimOf(id, 'durable')), {
          state: 'done',
          status: 200,
          body: '{"kept":true}',
        })
      } finally {
        await again.close()
      }
    })

    test('claims of one key racing each other: exactly one holds it', async () => {
      const id = await account()
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, () => storage.idempotency.claim(claimOf(id, 'race'))),
      )
      assert.equal(outcomes.filter((outcome) => outcome.state === 'claimed').length, 1)
      assert.equal(outcomes.filter((outcome) => outcome.state === 'running').length, 7)
    })
  })
}
