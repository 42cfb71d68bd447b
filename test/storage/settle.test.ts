import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import { SETTLE_BATCH, type InstrumentedStorage } from '../../src/storage/index.js'
import { EVENT_TYPES, newSigningSecret, newSubscriptionId, plantCreated } from '../../src/webhooks/events.js'
import { backends, freshStorage } from '../helpers/backends.js'

// The default queue cap: the size a tenant can make a disabled subscription's queue.
const CAP = 10_000

for (const backend of backends) {
  describe(`failing the queue of a subscription disabled at the default cap (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let dispose: () => Promise<void>
    before(async () => {
      ;({ storage, dispose } = await freshStorage(backend, {
        migrate: true,
        limits: {
          plantsPerAccount: 0,
          subscriptionsPerAccount: 10,
          queuedPerSubscription: CAP,
          idempotencyKeysPerAccount: 0,
        },
      }))
    })
    after(() => dispose())

    // The test's own timeout: a batch as slow as the one this guards against would otherwise run for many minutes.
    test(
      'goes in batches that each end well within the lock timeout, until every queued delivery has failed',
      { timeout: 60_000 },
      async () => {
        const { accountId } = await storage.tokens.create(mintToken({ accountName: 'full' }).record)
        const subscription = await storage.webhooks.createSubscription({
          id: newSubscriptionId(),
          accountName: 'full',
          url: 'http://127.0.0.1:9/hook',
          secret: newSigningSecret(),
          eventTypes: [...EVENT_TYPES],
        })
        for (let from = 1; from <= CAP + 1; from += 500) {
          const ids = Array.from({ length: Math.min(500, CAP + 2 - from) }, (_, i) => BigInt(from + i))
          await Promise.all(
            ids.map((id) => storage.plants.create(accountId, { id, name: 'p', tag: null }, plantCreated)),
          )
        }
        const [disabled] = await storage.webhooks.listSubscriptions({ accountId })
        assert.equal(disabled!.disabledReason, 'backlog')

        const slowest = { ms: 0, batches: 0 }
        for (;;) {
          const started = performance.now()
          const changed = await storage.webhooks.settleDisabled(SETTLE_BATCH)
          slowest.ms = Math.max(slowest.ms, performance.now() - started)
          if (changed === 0) break
          assert.ok(changed <= 2 * SETTLE_BATCH)
          slowest.batches++
        }
        assert.equal(slowest.batches, CAP / SETTLE_BATCH)
        assert.equal((await storage.webhooks.deliveryHistory(subscription.id, CAP)).failed.length, CAP)
        // A bound on behaviour, not a speed claim: a batch holds the subscription's row, and whatever waits on it (an
        // attempt being recorded, an enable) fails with 503 after the 5 s lock timeout. The slowest batch took about
        // 10 ms on SQLite and 50 ms on PostgreSQL here; with the rows chosen in a subquery correlated with the locked
        // subscription, PostgreSQL re-ran it for every row of the queue: 1.5 s per batch at this size.
        assert.ok(slowest.ms < 500, `the slowest batch took ${Math.round(slowest.ms)} ms`)
      },
    )
  })
}
