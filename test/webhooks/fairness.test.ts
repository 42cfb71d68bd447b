import assert from 'node:assert/strict'
import { afterEach, beforeEach, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js'
import { deliverySettings, loadConfig } from '../../src/config.js'
import { EVENT_TYPES, newSigningSecret, newSubscriptionId, plantCreated } from '../../src/webhooks/events.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'

const LEASE_MS = 60_000

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

    /** An account with `count` subscriptions to `url`, each with one event queued. */
    async function account(count: number, url: string) {
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
      await storage.plants.create(accountId, { id: 1n, name: 'Fern', tag: null }, plantCreated)
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

    test('delays another account by at most one attempt timeout while tarpits hold every slot', async () => {
      const tarpit = await startReceiver()
      tarpit.answer = () => 'hang'
      const healthy = await startReceiver()
      receivers.push(tarpit, healthy)
      // Four accounts of ten tarpitted subscriptions: with four each in flight they hold all 16 slots.
      for (let i = 0; i < 4; i++) await account(10, tarpit.url)
      const timeoutMs = 3000
      // The default settings (16 in flight, 4 per account) but for the timeout, retry and give-up.
      dispatcher = new WebhookDispatcher(storage.webhooks, {
        ...deliverySettings(loadConfig({})),
        timeoutMs,
        retryBaseMs: 60_000,
        giveUpAfterMs: 3_600_000,
        failedRetentionMs: 3_600_000,
        allowPrivate: true,
        pollMs: 20,
      })
      dispatcher.start()
      await tarpit.waitFor(16, 5000)
      await account(1, healthy.url)
      await healthy.waitFor(1, 30_000)
      // Counted, not timed: one timeout frees a slot, and the account holding no lease gets it before the tarpits'
      // next, whose other 15 slots free with it. Without fairness it waited for a second round of the tarpits (32
      // attempts), a whole timeout later: that is the margin for its own claim and POST.
      assert.ok(tarpit.received.length < 32, `delivered after ${tarpit.received.length} attempts to the tarpits`)
    })
  })
}
