import assert from 'node:assert/strict'
import { afterEach, beforeEach, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import {
  EVENT_TYPES,
  newSigningSecret,
  newSubscriptionId,
  plantCreated,
  plantDeleted,
  type EventType,
} from '../../src/webhooks/events.js'
import { WebhookDispatcher, type DispatcherOptions } from '../../src/webhooks/dispatcher.js'
import { deliverySettings, loadConfig } from '../../src/config.js'
import { send } from '../../src/webhooks/send.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { startReceiver, verified, type Receiver } from '../helpers/receiver.js'
import { eventually } from '../helpers/server-process.js'

// A timeout generous enough for a loaded machine: a late answer would count as a failure and be retried.
const FAST: DispatcherOptions = {
  ...deliverySettings(loadConfig({})),
  timeoutMs: 1000,
  retryBaseMs: 50,
  giveUpAfterMs: 60_000,
  failedRetentionMs: 3_600_000,
  allowPrivate: true,
  pollMs: 20,
}

describe('one webhook attempt', () => {
  test('keeps no more than a 256-byte excerpt of a failed answer', async () => {
    const receiver = await startReceiver()
    try {
      receiver.answer = () => ({ status: 500, body: 'x'.repeat(100_000) })
      const result = await send(receiver.url, {}, '{}', { timeoutMs: 2000, allowPrivate: true })
      assert.equal(result.ok, false)
      assert.equal(result.status, 500)
      assert.ok(result.error!.length <= 256 + 'not 2xx: '.length, `${result.error!.length} characters kept`)
      assert.match(result.error!, /^not 2xx: x+$/)
    } finally {
      await receiver.close()
    }
  })
})

for (const backend of backends) {
  describe(`webhook delivery (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let dispose: () => Promise<void>
    let receiver: Receiver
    let dispatcher: WebhookDispatcher | undefined
    let account = 0
    // A fresh store per test: the queue depth counts every account's deliveries.
    beforeEach(async () => {
      ;({ storage, dispose } = await freshStorage(backend))
    })
    afterEach(async () => {
      await dispatcher?.stop()
      dispatcher = undefined
      await receiver?.close()
      await dispose()
    })

    /** A new account subscribed to `events` at a fresh receiver; returns its id and the secret. */
    async function subscribed(events: EventType[] = [...EVENT_TYPES], url = (receiverUrl: string) => receiverUrl) {
      receiver = await startReceiver()
      const name = `hooked${++account}`
      const token = await storage.tokens.create(mintToken({ accountName: name }).record)
      const secret = newSigningSecret()
      const subscription = await storage.webhooks.createSubscription({
        id: newSubscriptionId(),
        accountName: name,
        url: url(receiver.url),
        secret,
        eventTypes: events,
      })
      return { accountId: token.accountId, secret, subscription }
    }

    /**
     * Proves the dispatcher has made every attempt it owed before now: queues an event for a new subscription and
     * waits for its delivery and an empty outbox. With one attempt in flight at a time and claims oldest-due first,
     * an attempt still owed to an older subscription would have been made, and received, before this one.
     */
    async function deliverMarker() {
      const markerReceiver = await startReceiver()
      try {
        const name = `marker${++account}`
        const token = await storage.tokens.create(mintToken({ accountName: name }).record)
        await storage.webhooks.createSubscription({
          id: newSubscriptionId(),
          accountName: name,
          url: markerReceiver.url,
          secret: newSigningSecret(),
          eventTypes: ['plant.created'],
        })
        await storage.plants.create(token.accountId, { id: 1n, name: 'marker', tag: null }, plantCreated)
        await markerReceiver.waitFor(1)
        await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
      } finally {
        await markerReceiver.close()
      }
    }

    const run = (options: Partial<DispatcherOptions> = {}) => {
      dispatcher = new WebhookDispatcher(storage.webhooks, { ...FAST, ...options })
      dispatcher.start()
    }

    test('delivers plant.created (the NewPlant, id exact) and plant.deleted ({id}), each signed', async () => {
      const { accountId, secret } = await subscribed()
      await storage.plants.create(
        accountId,
        { id: 9223372036854775807n, name: 'Monstera', tag: 'tropical' },
        plantCreated,
      )
      await storage.plants.delete(accountId, 9223372036854775807n, plantDeleted)
      run()
      const [created, deleted] = await receiver.waitFor(2)
      assert.equal(created!.body, '{"id":9223372036854775807,"name":"Monstera","tag":"tropical"}')
      assert.equal(created!.headers['plantstore-event-type'], 'plant.created')
      assert.equal(created!.headers['content-type'], 'application/json')
      assert.equal(deleted!.body, '{"id":9223372036854775807}')
      assert.equal(deleted!.headers['plantstore-event-type'], 'plant.deleted')
      for (const request of [created!, deleted!]) assert.ok(verified(secret, request))
      assert.notEqual(created!.headers['webhook-id'], deleted!.headers['webhook-id'])
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
    })

    test('queues nothing for a create that found the plant there, a failed delete, or an unwanted type', async () => {
      const { accountId } = await subscribed(['plant.deleted'])
      await storage.plants.create(accountId, { id: 1n, name: 'a', tag: null }, plantCreated)
      await storage.plants.create(accountId, { id: 1n, name: 'a', tag: null }, plantCreated)
      await storage.plants.create(accountId, { id: 1n, name: 'b', tag: null }, plantCreated)
      assert.equal(await storage.plants.delete(accountId, 2n, plantDeleted), false)
      assert.equal(await storage.webhooks.countPendingDeliveries(), 0)
      await storage.plants.delete(accountId, 1n, plantDeleted)
      assert.equal(await storage.webhooks.countPendingDeliveries(), 1)
    })

    test('retries after a 500, with the same webhook-id, until the receiver takes it', async () => {
      const { accountId, secret } = await subscribed()
      receiver.answer = (_request, index) => ({ status: index < 2 ? 500 : 200 })
      await storage.plants.create(accountId, { id: 5n, name: 'Fern', tag: null }, plantCreated)
      run()
      const attempts = await receiver.waitFor(3)
      assert.equal(new Set(attempts.map((request) => request.headers['webhook-id'])).size, 1)
      assert.ok(verified(secret, attempts[2]!))
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
      // A subscription's events go in order: an attempt after the 200 would reach the receiver before the next event.
      await storage.plants.create(accountId, { id: 6n, name: 'Next', tag: null }, plantCreated)
      await receiver.waitFor(4)
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
      assert.deepEqual(
        receiver.received.map((request) => (JSON.parse(request.body) as { id: number }).id),
        [5, 5, 5, 6],
        'nothing sent after the 200',
      )
    })

    test('retries after a receiver that does not answer within the timeout', async () => {
      const { accountId } = await subscribed()
      receiver.answer = (_request, index) => (index === 0 ? 'hang' : { status: 204 })
      await storage.plants.create(accountId, { id: 6n, name: 'Ivy', tag: null }, plantCreated)
      run()
      const [first, second] = await receiver.waitFor(2)
      assert.equal(first!.headers['webhook-id'], second!.headers['webhook-id'])
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
    })

    test('does not follow a redirect: a 3xx is a failed attempt', async () => {
      const { accountId } = await subscribed()
      receiver.answer = (request, index) =>
        index === 0
          ? { status: 307, headers: { location: receiver.url.replace('/hook', '/elsewhere') } }
          : { status: 200 }
      await storage.plants.create(accountId, { id: 7n, name: 'Palm', tag: null }, plantCreated)
      run()
      const [first, second] = await receiver.waitFor(2)
      assert.deepEqual([first!.path, second!.path], ['/hook', '/hook'])
    })

    test('keeps each subscription in order: the next event waits for the one before it', async () => {
      const { accountId } = await subscribed(['plant.created'])
      receiver.answer = (_request, index) => ({ status: index === 0 ? 500 : 200 })
      for (let id = 1n; id <= 5n; id++)
        await storage.plants.create(accountId, { id, name: `p${id}`, tag: null }, plantCreated)
      run()
      const received = await receiver.waitFor(6)
      const ids = received.map((request) => (JSON.parse(request.body) as { id: number }).id)
      assert.deepEqual(ids, [1, 1, 2, 3, 4, 5])
    })

    test('disables a subscription that failed for the whole give-up period: its queued deliveries fail, no more attempts', async () => {
      const { accountId, subscription } = await subscribed()
      receiver.answer = () => ({ status: 500 })
      for (let id = 1n; id <= 3n; id++)
        await storage.plants.create(accountId, { id, name: 'Cactus', tag: null }, plantCreated)
      run({ giveUpAfterMs: 0, concurrency: 1 })
      await receiver.waitFor(1)
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
      await deliverMarker()
      assert.equal(receiver.received.length, 1, 'one attempt, then given up')
      const [listed] = await storage.webhooks.listSubscriptions({ accountId })
      assert.equal(listed!.state, 'disabled')
      assert.equal(listed!.disabledReason, 'failing')
      const history = await storage.webhooks.deliveryHistory(subscription.id, 10)
      assert.equal(history.failed.length, 3, 'every queued delivery failed with it')
      assert.equal(history.failed.find((failed) => failed.attempts === 1)?.lastStatus, 500)
      assert.deepEqual(
        history.attempts.map((attempt) => [attempt.outcome, attempt.status]),
        [['failed', 500]],
      )
      await storage.plants.create(accountId, { id: 4n, name: 'Cactus', tag: null }, plantCreated)
      assert.equal(await storage.webhooks.countPendingDeliveries(), 0, 'nothing queued while disabled')
    })

    test('delivers again once a disabled subscription is enabled, from the events made after that', async () => {
      const { accountId, subscription } = await subscribed(['plant.created'])
      receiver.answer = (_request, index) => ({ status: index === 0 ? 500 : 200 })
      await storage.plants.create(accountId, { id: 1n, name: 'lost', tag: null }, plantCreated)
      run({ giveUpAfterMs: 0 })
      await eventually(
        async () => (await storage.webhooks.listSubscriptions({ accountId }))[0]!.state === 'disabled',
        5000,
        20,
      )
      await storage.plants.create(accountId, { id: 2n, name: 'while disabled', tag: null }, plantCreated)
      assert.equal(
        await storage.webhooks.enableSubscription(subscription.id, accountId + 1000),
        undefined,
        'not by another account',
      )
      const enabled = await storage.webhooks.enableSubscription(subscription.id, accountId)
      assert.equal(enabled?.state, 'active')
      assert.equal(enabled?.disabledReason, null)
      await storage.plants.create(accountId, { id: 3n, name: 'after', tag: null }, plantCreated)
      const [, second] = await receiver.waitFor(2)
      assert.equal(second!.body, '{"id":3,"name":"after"}')
    })
    test('never connects to a private address unless allowed, even when the subscription names one', async () => {
      // By name: localhost resolves to loopback, which the connection's own lookup refuses.
      const { accountId } = await subscribed(['plant.created'], (url) => url.replace('127.0.0.1', 'localhost'))
      await storage.plants.create(accountId, { id: 9n, name: 'Moss', tag: null }, plantCreated)
      const outcomes: string[] = []
      run({ allowPrivate: false, onAttempt: (outcome) => outcomes.push(outcome) })
      await eventually(async () => outcomes.length >= 2, 5000, 20)
      assert.ok(
        outcomes.every((outcome) => outcome === 'retry'),
        outcomes.join(),
      )
      assert.equal(receiver.received.length, 0)
      assert.equal(await storage.webhooks.countPendingDeliveries(), 1, 'still pending, to be retried')
    })

    test('delivers to more subscriptions than it has attempts in flight, without stalling', async () => {
      const receivers: Receiver[] = []
      const accounts: number[] = []
      for (let i = 0; i < 3; i++) {
        accounts.push((await subscribed()).accountId)
        receivers.push(receiver)
        receiver.answer = () => ({ status: 200, delayMs: 100 })
      }
      for (const id of accounts) await storage.plants.create(id, { id: 1n, name: 'Fern', tag: null }, plantCreated)
      run({ concurrency: 1 })
      await Promise.all(receivers.map((hooked) => hooked.waitFor(1)))
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
      // The last is closed by afterEach.
      await Promise.all(receivers.slice(0, -1).map((hooked) => hooked.close()))
    })

    test('starts the give-up clock over after a success: a receiver that recovers is not given up on', async () => {
      const { accountId, subscription } = await subscribed(['plant.created'])
      // Fail, then succeed slowly (past the give-up period since the failure), then fail once more, then succeed.
      receiver.answer = (_request, index) => [{ status: 500 }, { status: 200, delayMs: 600 }][index % 2]!
      await storage.plants.create(accountId, { id: 1n, name: 'a', tag: null }, plantCreated)
      await storage.plants.create(accountId, { id: 2n, name: 'b', tag: null }, plantCreated)
      run({ giveUpAfterMs: 400 })
      await receiver.waitFor(4)
      await eventually(async () => (await storage.webhooks.countPendingDeliveries()) === 0, 5000, 20)
      const [listed] = await storage.webhooks.listSubscriptions({ accountId })
      assert.equal(listed!.state, 'active', 'the second failure came 600 ms after the first, but after a success')
      assert.equal((await storage.webhooks.deliveryHistory(subscription.id, 10)).failed.length, 0)
    })

    test('records an attempt that cannot be made as failed and goes on: a stored URL the API refuses, a header Node refuses', async () => {
      const rejections: unknown[] = []
      const onRejection = (err: unknown) => rejections.push(err)
      process.on('unhandledRejection', onRejection)
      try {
        receiver = await startReceiver()
        /** A new account subscribed at `url`, as a store written before every way in checked URLs may hold it. */
        const hookedAt = async (url: string) => {
          const name = `hooked${++account}`
          const { accountId } = await storage.tokens.create(mintToken({ accountName: name }).record)
          const subscription = await storage.webhooks.createSubscription({
            id: newSubscriptionId(),
            accountName: name,
            url,
            secret: newSigningSecret(),
            eventTypes: ['plant.created'],
          })
          return { accountId, subscription }
        }
        const plant = { id: 1n, name: 'Fern', tag: null }
        const expected = new Map<string, string>()
        for (const [url, error] of [
          ['not a url', 'URL is not a URL'],
          ['ftp://127.0.0.1/plants', 'URL must be http or https'],
          [receiver.url.replace('http://', 'http://ops:hunter2@'), 'URL must not carry credentials'],
        ]) {
          const { accountId, subscription } = await hookedAt(url!)
          await storage.plants.create(accountId, plant, plantCreated)
          expected.set(subscription.id, error!)
        }
        // An event id no header can carry: the request is refused by Node before anything is sent.
        const { accountId, subscription } = await hookedAt(receiver.url)
        await storage.plants.create(accountId, plant, (made) => ({ ...plantCreated(made), id: 'msg_x\r\nforged: 1' }))
        expected.set(subscription.id, 'attempt failed: Invalid character in header content ["webhook-id"]')
        // Given up at the first failure, as the disabled subscriptions `webhooks deliveries` shows.
        run({ giveUpAfterMs: 0 })
        const attemptsOf = async (id: string) => (await storage.webhooks.deliveryHistory(id, 10)).attempts
        await eventually(
          async () => {
            for (const id of expected.keys()) if ((await attemptsOf(id)).length === 0) return false
            return true
          },
          5000,
          20,
        )
        for (const [id, error] of expected) {
          const attempts = await attemptsOf(id)
          assert.deepEqual(
            attempts.map((attempt) => [attempt.outcome, attempt.status, attempt.error]),
            [['failed', null, error]],
            id,
          )
        }
        await deliverMarker()
        assert.equal(receiver.received.length, 0, 'nothing sent: no credentials, no forged header')
        assert.deepEqual(rejections, [])
      } finally {
        process.off('unhandledRejection', onRejection)
      }
    })

    test('stops delivering a removed subscription, undelivered events included', async () => {
      const { accountId, subscription } = await subscribed()
      await storage.plants.create(accountId, { id: 10n, name: 'Aloe', tag: null }, plantCreated)
      assert.equal(
        await storage.webhooks.deleteSubscription(subscription.id, accountId + 1000),
        false,
        'not by another account',
      )
      assert.equal(await storage.webhooks.deleteSubscription(subscription.id, accountId), true)
      assert.equal(await storage.webhooks.countPendingDeliveries(), 0)
      run({ concurrency: 1 })
      await deliverMarker()
      assert.equal(receiver.received.length, 0)
    })
  })
}
