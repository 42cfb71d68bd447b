import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import { openStorage, SETTLE_BATCH, type InstrumentedStorage } from '../../src/storage/index.js'
import { LOCK_TIMEOUT_MS } from '../../src/storage/postgres/client.js'
import { BUSY_TIMEOUT_MS } from '../../src/storage/sqlite/database.js'
import { EVENT_TYPES, newSigningSecret, newSubscriptionId, plantCreated } from '../../src/webhooks/events.js'
import { backends, type TestDatabase } from '../helpers/backends.js'

// The default queue cap: the size a tenant can make a disabled subscription's queue.
const CAP = 10_000
// Batches timed on each side of the comparison: one-batch queues, and the head of the full queue.
const SAMPLES = 5
const median = (ms: number[]) => [...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)]!
const shown = (ms: number[]) => ms.map((n) => n.toFixed(1)).join(', ')

for (const backend of backends) {
  describe(`failing the queue of a subscription disabled at the default cap (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let database: TestDatabase
    before(async () => {
      // Commits not waiting for the WAL's flush on PostgreSQL: 10,000 plants are created in 5 s instead of 20 s.
      // Durability is not what is tested, and the batches compared below are timed under the same setting.
      database = await backend.createDatabase()
      const url = backend.name === 'postgres' ? `${database.url}&synchronous_commit=off` : database.url
      storage = await openStorage(url, {
        migrate: true,
        limits: {
          plantsPerAccount: 0,
          subscriptionsPerAccount: 10,
          queuedPerSubscription: CAP,
          idempotencyKeysPerAccount: 0,
        },
      })
    })
    after(async () => {
      await storage.close()
      await database.dispose()
    })

    /** An account with `subscriptions` subscriptions, each with `queued` deliveries queued (one per plant created). */
    const queue = async (accountName: string, subscriptions: number, queued: number) => {
      const { accountId } = await storage.tokens.create(mintToken({ accountName }).record)
      for (let i = 0; i < subscriptions; i++) {
        await storage.webhooks.createSubscription({
          id: newSubscriptionId(),
          accountName,
          url: 'http://127.0.0.1:9/hook',
          secret: newSigningSecret(),
          eventTypes: [...EVENT_TYPES],
        })
      }
      for (let from = 1; from <= queued; from += 500) {
        const ids = Array.from({ length: Math.min(500, queued + 1 - from) }, (_, i) => BigInt(from + i))
        await Promise.all(ids.map((id) => storage.plants.create(accountId, { id, name: 'p', tag: null }, plantCreated)))
      }
      return storage.webhooks.listSubscriptions({ accountId })
    }

    /** Settles up to `most` batches, or until nothing is left: each batch's duration in ms. */
    const settle = async (most = Infinity) => {
      const batches: number[] = []
      while (batches.length < most) {
        const started = performance.now()
        const changed = await storage.webhooks.settleDisabled(SETTLE_BATCH)
        if (changed === 0) break
        batches.push(performance.now() - started)
        assert.ok(changed <= 2 * SETTLE_BATCH)
      }
      return batches
    }

    // The test's own timeout: a batch as slow as the one this guards against would otherwise run for many minutes.
    test(
      'goes in batches that cost at the head of a full queue what they cost for a queue of one batch, each well within the lock timeout, until every queued delivery has failed',
      { timeout: 60_000 },
      async (t) => {
        // The baseline, on the same store and machine: queues of one batch, each disabled by a failed attempt (which
        // fails the delivery attempted).
        const small = await queue('small', SAMPLES, SETTLE_BATCH)
        const claimed = await storage.webhooks.claimDeliveries(SAMPLES, 60_000, SAMPLES)
        const report = { startedAt: new Date(), durationMs: 1, status: 500, error: 'down' }
        for (const delivery of claimed) await storage.webhooks.finishDelivery(delivery, { ...report, state: 'failed' })
        const baseline = await settle()
        assert.equal(baseline.length, SAMPLES)
        for (const subscription of small) {
          assert.equal((await storage.webhooks.deliveryHistory(subscription.id, CAP)).failed.length, SETTLE_BATCH)
        }

        const [full] = await queue('full', 1, CAP + 1)
        assert.equal(full!.disabledReason, 'backlog')
        const head = await settle(SAMPLES)
        // A bound on behaviour, not a speed claim: a batch holds the subscription's row, and whatever waits on it (an
        // attempt being recorded, an enable) fails with 503 after the lock timeout, so a batch must cost the same
        // whatever is queued behind it. With the rows chosen in a subquery correlated with the locked subscription,
        // PostgreSQL re-ran it for every row of the queue: 1.5 to 4 s a batch at the cap, 20 to 30 times a one-batch queue's.
        // Medians, so that a WAL checkpoint or a busy core on either side does not decide.
        const summary = `batches at the head of the full queue ${shown(head)} ms, of one-batch queues ${shown(baseline)} ms`
        assert.ok(median(head) < 5 * median(baseline), summary)

        const batches = [...head, ...(await settle())]
        assert.equal(batches.length, CAP / SETTLE_BATCH)
        assert.equal((await storage.webhooks.deliveryHistory(full!.id, CAP)).failed.length, CAP)
        // And no batch near the lock timeout a waiter gives up after (the setting, not a guess at this machine's speed).
        const lockTimeout = backend.name === 'postgres' ? LOCK_TIMEOUT_MS : BUSY_TIMEOUT_MS
        assert.ok(Math.max(...batches) < lockTimeout / 2, `batches ${shown(batches)} ms`)
        t.diagnostic(`${summary}; slowest of all ${Math.max(...batches).toFixed(1)} ms`)
      },
    )
  })
}
