import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, beforeEach, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import { PATIENCE_MS, WebhookDispatcher } from '../../src/webhooks/dispatcher.js'
import { deliverySettings, loadConfig } from '../../src/config.js'
import { EVENT_TYPES, newSigningSecret, newSubscriptionId, plantCreated } from '../../src/webhooks/events.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'

const LEASE_MS = 60_000

/** Resolves once `check` holds, polling; fails after 20 s, which only a hang takes. */
async function until(check: () => boolean): Promise<void> {
  for (const started = Date.now(); !check(); await sleep(5)) {
    if (Date.now() - started > 20_000) assert.fail('not within 20 s')
  }
}

for (const backend of backends) {
  describe(`fair webhook delivery between accounts (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let dispose: () => Promise<void>
    let accounts = 0
    const receivers: Receiver[] = []
    let dispatcher: WebhookDispatcher | undefined
    beforeEach(async () => {
      ;({ storage, dispose } = await freshStorage(backend))
    })
    afterEach(async () => {
      await Promise.all(receivers.splice(0).map((receiver) => receiver.close()))
      // Attempts hanging on a tarpit end at their timeout; stop waits for them.
      await dispatcher?.stop()
      dispatcher = undefined
      await dispose()
    })

    /** An account with `count` subscriptions to `url`, each with one event queued (unless `event` is false). */
    async function account(count: number, url: string, { event = true } = {}) {
      const name = `fair${++accounts}`
      const { accountId } = await storage.tokens.create(mintToken({ accountName: name }).record)
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const subscription = await storage.webhooks.createSubscription({
          id: newSubscriptionId(),
          accountName: name,
          url,
          secret: newSigningSecret(),
          eventTypes: [...EVENT_TYPES],
        })
        ids.push(subscription.id)
      }
      if (event) await storage.plants.create(accountId, { id: 1n, name: 'Fern', tag: null }, plantCreated)
      return { accountId, ids }
    }

    const owners = (claimed: Array<{ subscriptionId: string }>, ...groups: Array<{ ids: string[] }>) =>
      groups.map((group) => claimed.filter((delivery) => group.ids.includes(delivery.subscriptionId)).length)

    test('leases at most perAccount subscriptions of one account, over successive claims', async () => {
      const a = await account(10, 'http://127.0.0.1:9/a')
      const b = await account(1, 'http://127.0.0.1:9/b')
      assert.deepEqual(owners(await storage.webhooks.claimDeliveries(16, LEASE_MS, 4), a, b), [4, 1])
      assert.deepEqual(
        owners(await storage.webhooks.claimDeliveries(16, LEASE_MS, 4), a, b),
        [0, 0],
        'A holds its 4 leases',
      )
    })

    test('gives each account its first slot before any account its second', async () => {
      const a = await account(10, 'http://127.0.0.1:9/a')
      const b = await account(1, 'http://127.0.0.1:9/b')
      const c = await account(3, 'http://127.0.0.1:9/c')
      // Three slots: one each, though A's subscriptions were all ready first.
      assert.deepEqual(owners(await storage.webhooks.claimDeliveries(3, LEASE_MS, 4), a, b, c), [1, 1, 1])
      // Then the account holding fewer leases first: C and A (one each) before A's third.
      assert.deepEqual(owners(await storage.webhooks.claimDeliveries(2, LEASE_MS, 4), a, b, c), [1, 0, 1])
    })

    test('claims the same few whatever is queued behind them', async () => {
      const a = await account(2, 'http://127.0.0.1:9/a')
      for (let id = 2n; id <= 400n; id++)
        await storage.plants.create(a.accountId, { id, name: 'p', tag: null }, plantCreated)
      const claimed = await storage.webhooks.claimDeliveries(16, LEASE_MS, 4)
      assert.equal(claimed.length, 2, 'one attempt per subscription, the oldest event of each')
      assert.ok(claimed.every((delivery) => delivery.body === '{"id":1,"name":"Fern"}'))
      assert.equal(await storage.webhooks.countPendingDeliveries(), 2 * 400)
    })

    test("a deferred attempt leaves its subscription's failures and failing time as they were", async () => {
      const a = await account(1, 'http://127.0.0.1:9/a')
      const claim = async () => {
        const [delivery] = await storage.webhooks.claimDeliveries(16, LEASE_MS, 4)
        assert.equal(delivery?.subscriptionId, a.ids[0])
        return delivery!
      }
      const report = { startedAt: new Date(), durationMs: 1, status: null, error: 'no answer' }
      await storage.webhooks.finishDelivery(await claim(), { ...report, state: 'retry', nextAttemptAt: new Date() })
      const failing = await claim()
      assert.equal(failing.failures, 1)
      await storage.webhooks.finishDelivery(failing, { ...report, state: 'deferred', nextAttemptAt: new Date() })
      const deferred = await claim()
      assert.deepEqual([deferred.failures, deferred.failingSince], [1, failing.failingSince])
      assert.equal(deferred.attempts, 2, 'the deferred attempt is counted as made')
    })

    /**
     * `attackers` accounts of `each` subscriptions whose receiver never answers, all due at once, then alice's
     * deliveries timed while they hold every slot they can, and again, on the same dispatcher, once the tarpit is gone.
     */
    async function deliveriesUnderAttack(attackers: number, each: number, held: number) {
      const tarpit = await startReceiver()
      tarpit.answer = () => 'hang'
      const healthy = await startReceiver()
      receivers.push(tarpit, healthy)
      const tarpitted: string[] = []
      for (let i = 0; i < attackers; i++) tarpitted.push(...(await account(each, tarpit.url)).ids)
      const victim = await account(1, healthy.url, { event: false })
      // The default settings (16 in flight, 4 per account) and timeout (10 s), a short poll.
      const running = new WebhookDispatcher(storage.webhooks, {
        ...deliverySettings(loadConfig({})),
        retryBaseMs: 60_000,
        giveUpAfterMs: 3_600_000,
        failedRetentionMs: 3_600_000,
        allowPrivate: true,
        pollMs: 20,
      })
      dispatcher = running
      running.start()
      // The tarpits hold `held` slots (12 shared; the reserve too once there are more accounts than those hold), each
      // attempt having reached the tarpit.
      await until(() => tarpit.received.length >= held && tarpit.received.length === running.inFlight)
      /** Alice's event for plant `id`: the time until her receiver has it. */
      const deliver = async (id: bigint) => {
        const started = performance.now()
        await storage.plants.create(victim.accountId, { id, name: 'Fern', tag: null }, plantCreated)
        await healthy.waitFor(Number(id), 30_000)
        return performance.now() - started
      }
      const attacked: number[] = []
      for (let id = 1n; id <= 3n; id++) attacked.push(await deliver(id))
      const holding = running.inFlight
      await tarpit.close()
      await until(() => running.inFlight === 0)
      const quiet: number[] = []
      for (let id = 4n; id <= 8n; id++) quiet.push(await deliver(id))
      const seen = `alice's deliveries: ${quiet.map((ms) => ms.toFixed(0)).join(', ')} ms quiet; ${attacked.map((ms) => ms.toFixed(0)).join(', ')} ms while ${attackers} accounts' tarpits held ${holding} attempts`
      return { attacked, quiet, seen, tarpitted }
    }

    test("keeps another account's delivery time while four accounts' receivers that never answer hold every slot they may", async (ctx) => {
      const { attacked, quiet, seen } = await deliveriesUnderAttack(4, 4, 12)
      ctx.diagnostic(seen)
      // The reserve: a slot at once.
      assert.ok(Math.max(...attacked) < 10 * Math.max(...quiet), seen)
    })

    test("cuts the longest-running attempt for another account's event when sixteen accounts' receivers that never answer fill every slot, so it waits about PATIENCE_MS, not a timeout", async (ctx) => {
      const { attacked, quiet, seen, tarpitted } = await deliveriesUnderAttack(16, 1, 16)
      ctx.diagnostic(seen)
      assert.ok(Math.max(...attacked) < PATIENCE_MS + 10 * Math.max(...quiet), seen)
      // Each cut is recorded with why, deferred: tried again later, not counted against the tarpit's receiver.
      const histories = await Promise.all(tarpitted.map((id) => storage.webhooks.deliveryHistory(id, 10)))
      const cut = histories
        .flatMap((history) => history.attempts)
        .filter((attempt) => /^cut after/.test(attempt.error ?? ''))
      assert.ok(cut.length >= 1, 'a cut attempt is recorded')
      assert.ok(cut.every((attempt) => attempt.outcome === 'deferred'))
    })
  })
}
