import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { mintToken } from '../../src/auth/issue-token.js'
import { openStorage, type InstrumentedStorage } from '../../src/storage/index.js'
import type { OutboxEvent, StoredPlant } from '../../src/storage/types.js'
import { newSigningSecret, newSubscriptionId } from '../../src/webhooks/events.js'
import { backends, freshStorage, POSTGRES_URL, postgresBackend } from '../helpers/backends.js'

for (const backend of backends) {
  describe(`the events a plant change hands to storage (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let dispose: () => Promise<void>
    let accountId: number
    before(async () => {
      ;({ storage, dispose } = await freshStorage(backend))
      ;({ accountId } = await storage.tokens.create(mintToken({ accountName: 'events' }).record))
      await storage.webhooks.createSubscription({
        id: newSubscriptionId(),
        accountName: 'events',
        url: 'http://127.0.0.1:9/hook',
        secret: newSigningSecret(),
        eventTypes: ['custom.created', 'custom.deleted'],
      })
    })
    after(() => dispose())

    let sequence = 0
    /** An event builder that makes events of `type`, numbered, and keeps what it was asked about. */
    const builder =
      <T>(type: string, asked: T[]) =>
      (subject: T): OutboxEvent => {
        asked.push(subject)
        return { id: `evt_${++sequence}`, type, body: `{"n":${sequence}}` }
      }

    test('writes the event as the builder made it, once, for a change that happened', async () => {
      const asked: StoredPlant[] = []
      const plant = { id: 1n, name: 'Fern', tag: null }
      assert.equal(await storage.plants.create(accountId, plant, builder('custom.created', asked)), 'created')
      assert.equal(await storage.webhooks.countPendingDeliveries(), 1)
      const claimed = await storage.webhooks.claimDeliveries(16, 60_000, 4)
      assert.deepEqual(
        claimed.map((delivery) => [delivery.eventId, delivery.eventType, delivery.body]),
        [[`evt_${sequence}`, 'custom.created', `{"n":${sequence}}`]],
      )
      assert.deepEqual(asked.at(-1), plant, 'the builder was given the plant stored')
    })

    test('writes nothing for an identical re-create, a conflict or a delete of nothing', async () => {
      // The plant re-created and conflicted with, made here if no test before made it: its event is in `before`.
      await storage.plants.create(
        accountId,
        { id: 1n, name: 'Fern', tag: null },
        builder<StoredPlant>('custom.created', []),
      )
      const before = await storage.webhooks.countPendingDeliveries()
      const asked: unknown[] = []
      await storage.plants.create(accountId, { id: 1n, name: 'Fern', tag: null }, builder('custom.created', asked))
      await storage.plants.create(accountId, { id: 1n, name: 'Other', tag: null }, builder('custom.created', asked))
      assert.equal(await storage.plants.delete(accountId, 99n, builder('custom.deleted', asked)), false)
      assert.equal(await storage.webhooks.countPendingDeliveries(), before)
    })

    test('writes an event only for the subscriptions that want its type', async () => {
      const before = await storage.webhooks.countPendingDeliveries()
      const asked: unknown[] = []
      await storage.plants.create(accountId, { id: 2n, name: 'Moss', tag: null }, builder('other.type', asked))
      assert.equal(await storage.webhooks.countPendingDeliveries(), before)
      assert.equal(await storage.plants.delete(accountId, 2n, builder('custom.deleted', asked)), true)
      assert.equal(await storage.webhooks.countPendingDeliveries(), before + 1)
      assert.deepEqual(asked.at(-1), 2n, 'the builder was given the id deleted')
    })
  })
}

if (POSTGRES_URL !== undefined) {
  const server = POSTGRES_URL
  describe('the events of a plant change on PostgreSQL', () => {
    test('reads no webhook subscription for an account that has none', async () => {
      const database = await postgresBackend(server).createDatabase()
      const admin = postgres(database.url, { max: 1, onnotice: () => {} })
      const event = (plant: StoredPlant): OutboxEvent => ({ id: `evt_${plant.id}`, type: 'plant.created', body: '{}' })
      const name = `events-test-${process.pid}`
      const storageUrl = new URL(database.url)
      storageUrl.searchParams.set('application_name', name)
      // Each step on a connection of its own, waited for until its backend is gone: a backend writes its table
      // counters to pg_stat_user_tables before it leaves pg_stat_activity (an idle one reports them seconds later).
      const onOwnConnection = async (step: (storage: InstrumentedStorage) => Promise<unknown>) => {
        const storage = await openStorage(storageUrl.toString(), { migrate: true, poolSize: 1 })
        await step(storage).finally(() => storage.close())
        for (let deadline = Date.now() + 10_000; ; await new Promise((resolve) => setTimeout(resolve, 20))) {
          const [row] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE application_name = ${name}`
          if (row!.n === 0) return
          if (Date.now() > deadline) throw new Error(`a backend of ${name} is still connected`)
        }
      }
      const reads = async () => {
        const [row] = await admin<{ n: string }[]>`SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) AS n
          FROM pg_stat_user_tables WHERE relid = 'webhook_subscriptions'::regclass`
        return Number(row!.n)
      }
      const accounts: Record<string, number> = {}
      const create = (storage: InstrumentedStorage, account: string, id: bigint) =>
        storage.plants.create(accounts[account]!, { id, name: 'Fern', tag: null }, event)
      try {
        await onOwnConnection(async (storage) => {
          for (const name of ['quiet', 'busy'])
            accounts[name] = (await storage.tokens.create(mintToken({ accountName: name }).record)).accountId
          await storage.webhooks.createSubscription({
            id: newSubscriptionId(),
            accountName: 'busy',
            url: 'http://127.0.0.1:9/hook',
            secret: newSigningSecret(),
            eventTypes: ['plant.created'],
          })
        })
        const start = await reads()
        await onOwnConnection(async (storage) => {
          for (let id = 1n; id <= 5n; id++) await create(storage, 'quiet', id)
        })
        assert.equal(await reads(), start, 'five changes of an account without subscriptions read none')
        await onOwnConnection((storage) => create(storage, 'busy', 1n))
        assert.ok((await reads()) > start, 'a change of the account with one reads it (the counters are kept)')
        await onOwnConnection(async (storage) => assert.equal(await storage.webhooks.countPendingDeliveries(), 1))
      } finally {
        await admin.end()
        await database.dispose()
      }
    })
  })
}
