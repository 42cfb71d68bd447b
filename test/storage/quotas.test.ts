import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import { openStorage, type InstrumentedStorage } from '../../src/storage/index.js'
import { QuotaExceededError, type StorageLimits } from '../../src/storage/types.js'
import {
  EVENT_TYPES,
  newSigningSecret,
  newSubscriptionId,
  plantCreated,
  plantDeleted,
} from '../../src/webhooks/events.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { listPlants } from '../helpers/plants.js'

const LIMITS: StorageLimits = {
  plantsPerAccount: 3,
  subscriptionsPerAccount: 2,
  queuedPerSubscription: 3,
  idempotencyKeysPerAccount: 0,
}

const isQuota = (resource: string, limit: number) => (err: unknown) => {
  assert.ok(err instanceof QuotaExceededError, String(err))
  assert.equal(err.resource, resource)
  assert.equal(err.limit, limit)
  return true
}

for (const backend of backends) {
  describe(`per-account quotas (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let url: string
    let dispose: () => Promise<void>
    let accounts = 0
    const cleanups: Array<() => Promise<void>> = []
    before(async () => {
      ;({ storage, url, dispose } = await freshStorage(backend, { migrate: true, limits: LIMITS }))
    })
    after(async () => {
      for (const cleanup of cleanups) await cleanup()
      await dispose()
    })

    const account = async () => {
      const name = `quota${++accounts}`
      return { name, id: (await storage.tokens.create(mintToken({ accountName: name }).record)).accountId }
    }
    const subscribe = (accountName: string) =>
      storage.webhooks.createSubscription({
        id: newSubscriptionId(),
        accountName,
        url: 'http://127.0.0.1:9/hook',
        secret: newSigningSecret(),
        eventTypes: [...EVENT_TYPES],
      })

    /** `count` plant events for the account (creates and deletes of one plant, so the plant quota is not reached). */
    const events = async (accountId: number, count: number) => {
      for (let i = 0; i < count; i++) {
        if (i % 2 === 0) await storage.plants.create(accountId, { id: 100n, name: 'p', tag: null }, plantCreated)
        else await storage.plants.delete(accountId, 100n, plantDeleted)
      }
    }

    test('refuses a new plant once the account holds its quota; an identical re-create and a conflict still answer', async () => {
      const { id } = await account()
      for (let plant = 1n; plant <= 3n; plant++) {
        assert.equal(await storage.plants.create(id, { id: plant, name: 'p', tag: null }, plantCreated), 'created')
      }
      await assert.rejects(
        storage.plants.create(id, { id: 4n, name: 'p', tag: null }, plantCreated),
        isQuota('plants', 3),
      )
      assert.equal(await storage.plants.create(id, { id: 1n, name: 'p', tag: null }, plantCreated), 'identical')
      assert.equal(await storage.plants.create(id, { id: 1n, name: 'other', tag: null }, plantCreated), 'conflict')
      assert.equal((await listPlants(storage.plants, id, { limit: 10 })).length, 3, 'the refused plant was not stored')
    })

    test('a delete makes room again, and one account at its quota does not limit another', async () => {
      const full = await account()
      const other = await account()
      for (let plant = 1n; plant <= 3n; plant++)
        await storage.plants.create(full.id, { id: plant, name: 'p', tag: null }, plantCreated)
      assert.equal(await storage.plants.create(other.id, { id: 1n, name: 'p', tag: null }, plantCreated), 'created')
      assert.equal(await storage.plants.delete(full.id, 2n, plantDeleted), true)
      assert.equal(await storage.plants.create(full.id, { id: 4n, name: 'p', tag: null }, plantCreated), 'created')
      await assert.rejects(
        storage.plants.create(full.id, { id: 5n, name: 'p', tag: null }, plantCreated),
        isQuota('plants', 3),
      )
    })

    /** Separate storages on one database with a quota of 20, each with its own pool: as several instances. */
    const instances = async () => {
      const opened: InstrumentedStorage[] = []
      for (let i = 0; i < 4; i++) {
        const instance = await openStorage(url, { migrate: false, limits: { ...LIMITS, plantsPerAccount: 20 } })
        opened.push(instance)
        cleanups.push(() => instance.close())
      }
      return opened
    }

    test('creates racing on several instances store exactly the quota, the rest refused; deletes free room', async () => {
      const several = await instances()
      const { id } = await account()
      let next = 0n
      const race = (count: number) =>
        Promise.allSettled(
          Array.from({ length: count }, (_, i) =>
            several[i % several.length]!.plants.create(id, { id: ++next, name: 'p', tag: null }, plantCreated),
          ),
        )
      const outcomes = [...(await race(40)), ...(await race(40))]
      const created = outcomes.filter((outcome) => outcome.status === 'fulfilled')
      for (const outcome of outcomes) {
        if (outcome.status === 'fulfilled') assert.equal(outcome.value, 'created')
        else assert.ok(isQuota('plants', 20)(outcome.reason))
      }
      const stored = await listPlants(storage.plants, id, { limit: 100 })
      assert.equal(stored.length, 20, `${created.length} answered created, ${stored.length} stored`)
      assert.equal(created.length, 20)
      for (const plant of stored.slice(0, 5))
        assert.equal(await storage.plants.delete(id, plant.id, plantDeleted), true)
      const refill = await race(40)
      assert.equal(refill.filter((outcome) => outcome.status === 'fulfilled').length, 5, 'the five deleted made room')
      assert.equal((await listPlants(storage.plants, id, { limit: 100 })).length, 20)
    })

    test('identical, conflicting and equal creates racing on several instances take no room', async () => {
      const several = await instances()
      const { id } = await account()
      assert.equal(await storage.plants.create(id, { id: 1n, name: 'p', tag: null }, plantCreated), 'created')
      const again = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          several[i % several.length]!.plants.create(id, { id: 1n, name: i % 2 ? 'q' : 'p', tag: null }, plantCreated),
        ),
      )
      assert.deepEqual(new Set(again), new Set(['identical', 'conflict']))
      // Rounds of twelve racing creates of one new id: one is created, the others find it.
      for (let plant = 2n; plant <= 10n; plant++) {
        const same = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            several[i % several.length]!.plants.create(id, { id: plant, name: 'p', tag: null }, plantCreated),
          ),
        )
        assert.equal(same.filter((outcome) => outcome === 'created').length, 1)
      }
      // Ten plants stored, so ten more fit, one by one, and no more.
      for (let plant = 11n; plant <= 20n; plant++) {
        assert.equal(await several[0]!.plants.create(id, { id: plant, name: 'p', tag: null }, plantCreated), 'created')
      }
      await assert.rejects(
        several[0]!.plants.create(id, { id: 21n, name: 'p', tag: null }, plantCreated),
        isQuota('plants', 20),
      )
    })

    test('refuses a subscription past the account quota; removing one makes room', async () => {
      const { name, id } = await account()
      const first = await subscribe(name)
      await subscribe(name)
      await assert.rejects(subscribe(name), isQuota('subscriptions', 2))
      assert.equal((await storage.webhooks.listSubscriptions({ accountId: id })).length, 2)
      assert.equal(await storage.webhooks.deleteSubscription(first.id, id), true)
      await subscribe(name)
      const other = await account()
      await subscribe(other.name)
    })

    test('creates racing at the subscription quota store exactly the quota', async () => {
      const { name, id } = await account()
      const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => subscribe(name)))
      assert.equal(outcomes.filter((outcome) => outcome.status === 'fulfilled').length, 2)
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') assert.ok(isQuota('subscriptions', 2)(outcome.reason))
      }
      assert.equal((await storage.webhooks.listSubscriptions({ accountId: id })).length, 2)
    })

    test('disables a subscription whose queue is at its cap: the queued deliveries fail, nothing more is queued', async () => {
      const { name, id } = await account()
      const subscription = await subscribe(name)
      for (let plant = 1n; plant <= 3n; plant++)
        await storage.plants.create(id, { id: plant, name: 'p', tag: null }, plantCreated)
      assert.equal((await storage.webhooks.listSubscriptions({ accountId: id }))[0]!.queued, 3)
      // The fourth event finds the queue at its cap of 3.
      await storage.plants.delete(id, 1n, plantDeleted)
      const [disabled] = await storage.webhooks.listSubscriptions({ accountId: id })
      assert.equal(disabled!.state, 'disabled')
      assert.equal(disabled!.disabledReason, 'backlog')
      assert.ok(disabled!.disabledAt instanceof Date)
      assert.equal(disabled!.queued, 0)
      assert.equal(await storage.webhooks.countPendingDeliveries(), 0)
      // The disabling change only marked it; settling fails what it held, at most `limit` rows a call.
      assert.equal((await storage.webhooks.deliveryHistory(subscription.id, 10)).failed.length, 0)
      assert.equal(await storage.webhooks.settleDisabled(2), 2)
      assert.equal(await storage.webhooks.settleDisabled(2), 1)
      assert.equal(await storage.webhooks.settleDisabled(2), 0, 'nothing left to settle')
      const history = await storage.webhooks.deliveryHistory(subscription.id, 10)
      assert.equal(history.failed.length, 3)
      assert.match(history.failed[0]!.lastError!, /queue reached its cap/)
      await storage.plants.delete(id, 2n, plantDeleted)
      assert.equal(
        (await storage.webhooks.listSubscriptions({ accountId: id }))[0]!.queued,
        0,
        'none queued while disabled',
      )
      assert.equal((await storage.webhooks.claimDeliveries(16, 60_000, 4)).length, 0, 'and none attempted')
      const enabled = await storage.webhooks.enableSubscription(subscription.id, id)
      assert.equal(enabled!.state, 'active')
      await storage.plants.delete(id, 3n, plantDeleted)
      assert.equal((await storage.webhooks.listSubscriptions({ accountId: id }))[0]!.queued, 1)
    })

    test('enabling first fails what the subscription held, so nothing from before its disabling is attempted after', async () => {
      const { name, id } = await account()
      const subscription = await subscribe(name)
      await events(id, 4)
      assert.equal((await storage.webhooks.listSubscriptions({ accountId: id }))[0]!.state, 'disabled')
      // Enabled before any settling ran.
      await storage.webhooks.enableSubscription(subscription.id, id)
      assert.equal((await storage.webhooks.deliveryHistory(subscription.id, 10)).failed.length, 3)
      assert.equal(await storage.webhooks.settleDisabled(10), 0)
      await storage.plants.create(id, { id: 5n, name: 'new', tag: null }, plantCreated)
      const claimed = (await storage.webhooks.claimDeliveries(16, 60_000, 4)).filter(
        (delivery) => delivery.subscriptionId === subscription.id,
      )
      assert.deepEqual(
        claimed.map((delivery) => delivery.body),
        ['{"id":5,"name":"new"}'],
      )
    })

    test('an attempt given up on after its subscription was disabled keeps the reason and time of that disabling', async () => {
      const { name, id } = await account()
      const subscription = await subscribe(name)
      await events(id, 1)
      const [claimed] = (await storage.webhooks.claimDeliveries(16, 60_000, 4)).filter(
        (delivery) => delivery.subscriptionId === subscription.id,
      )
      // Two more events fill the queue to its cap of 3 while the attempt is out; the next disables it.
      await storage.plants.delete(id, 100n, plantDeleted)
      await events(id, 2)
      const [disabled] = await storage.webhooks.listSubscriptions({ accountId: id })
      assert.equal(disabled!.disabledReason, 'backlog')
      await new Promise((resolve) => setTimeout(resolve, 20))
      const report = { startedAt: new Date(), durationMs: 1, status: 500, error: 'down' }
      await storage.webhooks.finishDelivery(claimed!, { ...report, state: 'failed' })
      const [after] = await storage.webhooks.listSubscriptions({ accountId: id })
      assert.deepEqual(
        [after!.state, after!.disabledReason, after!.disabledAt],
        ['disabled', 'backlog', disabled!.disabledAt],
      )
    })

    test('keeps the failed deliveries of the latest disabling only', async () => {
      const { name, id } = await account()
      const subscription = await subscribe(name)
      const fill = async () => {
        await events(id, 4)
        while ((await storage.webhooks.settleDisabled(2)) > 0);
      }
      await fill()
      const first = (await storage.webhooks.deliveryHistory(subscription.id, 10)).failed.map((failed) => failed.eventId)
      assert.equal(first.length, 3)
      await storage.webhooks.enableSubscription(subscription.id, id)
      await fill()
      const second = (await storage.webhooks.deliveryHistory(subscription.id, 10)).failed.map(
        (failed) => failed.eventId,
      )
      assert.equal(second.length, 3)
      assert.deepEqual(
        second.filter((eventId) => first.includes(eventId)),
        [],
        "the first disabling's went",
      )
    })
  })
}
