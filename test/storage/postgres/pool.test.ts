import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { mintToken } from '../../../src/auth/issue-token.js'
import { openStorage, type InstrumentedStorage } from '../../../src/storage/index.js'
import { EVENT_TYPES, newSigningSecret, newSubscriptionId, plantCreated } from '../../../src/webhooks/events.js'
import { POSTGRES_URL, postgresBackend, type TestDatabase } from '../../helpers/backends.js'
import { listPlants } from '../../helpers/plants.js'

// This run's own: the test ends every session of this name, and other test runs may share the database server.
const APP = `plantstore-pool-test-${randomBytes(6).toString('hex')}`
const OUTCOME = { startedAt: new Date(), durationMs: 5, status: 500, error: 'no' } as const

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('PostgreSQL storage on a small, busy pool', () => {
    let database: TestDatabase
    let admin: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      admin = postgres(database.url, { max: 1, onnotice: () => {} })
    })
    after(async () => {
      await admin.end()
      await database.dispose()
    })

    /** Storage on the test's schema through a pool of `poolSize` connections its own application name tells apart. */
    async function open(poolSize = 2): Promise<InstrumentedStorage> {
      const url = new URL(database.url)
      url.searchParams.set('application_name', APP)
      return openStorage(url.toString(), { migrate: true, poolSize })
    }

    /** This run's sessions waiting on a lock `tx` holds, once there is one (10 s at most): their process ids. */
    async function waitingOn(tx: postgres.TransactionSql, who: string): Promise<number[]> {
      const deadline = Date.now() + 10_000
      for (;;) {
        assert.ok(Date.now() < deadline, `${who} never waited on the lock`)
        await new Promise((resolve) => setTimeout(resolve, 10))
        const rows = await tx<{ pid: number }[]>`SELECT pid FROM pg_stat_activity
          WHERE application_name = ${APP} AND pg_backend_pid() = ANY(pg_blocking_pids(pid))`
        if (rows.length > 0) return rows.map((row) => row.pid)
      }
    }

    /** One of every kind of write, all at once: tokens, subscriptions, plants with their events, attempts. */
    async function burst(storage: InstrumentedStorage, round: number): Promise<void> {
      const account = `burst${round}`
      const { accountId } = await storage.tokens.create(mintToken({ accountName: account }).record)
      const subscribe = () =>
        storage.webhooks.createSubscription({
          id: newSubscriptionId(),
          accountName: account,
          url: 'http://127.0.0.1:9/hook',
          secret: newSigningSecret(),
          eventTypes: [...EVENT_TYPES],
        })
      const [kept, removed] = await Promise.all([subscribe(), subscribe()])
      // A read, then a write that used to need a transaction, and so on: each write queues behind a statement that
      // keeps a connection busy, where postgres.js sent sql.begin's BEGIN without holding the connection for it.
      const writes: Array<Promise<unknown>> = [
        listPlants(storage.plants, accountId, { limit: 5 }),
        storage.webhooks.deleteSubscription(removed.id, accountId),
      ]
      for (let i = 0; i < 8; i++) {
        writes.push(listPlants(storage.plants, accountId, { limit: 5 }))
        writes.push(storage.tokens.create(mintToken({ accountName: account }).record))
        writes.push(storage.plants.create(accountId, { id: BigInt(i), name: 'Fern', tag: null }, plantCreated))
      }
      await Promise.all(writes)
      const claimed = (await storage.webhooks.claimDeliveries(16, 60_000, 4)).filter(
        (d) => d.subscriptionId === kept.id,
      )
      await Promise.all(
        claimed.map((delivery) => storage.webhooks.finishDelivery(delivery, { ...OUTCOME, state: 'failed' })),
      )
    }

    test("keeps every write of all kinds at once, and each account's count of subscriptions right", async () => {
      const storage = await open()
      try {
        for (let round = 0; round < 10; round++) await burst(storage, round)
      } finally {
        await storage.close()
      }
      const [row] = await admin<{ subscriptions: number; attempts: number; off: number }[]>`SELECT
        (SELECT count(*)::int FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id
          WHERE a.name LIKE 'burst%') AS subscriptions,
        (SELECT count(*)::int FROM webhook_attempts) AS attempts,
        (SELECT count(*)::int FROM accounts a WHERE subscriptions <>
          (SELECT count(*) FROM webhook_subscriptions s WHERE s.account_id = a.id)) AS off`
      assert.deepEqual(row, { subscriptions: 10, attempts: 10, off: 0 })
    })

    test('delivers on connections of its own: a claim is answered while every request connection waits', async () => {
      const storage = await open(1)
      try {
        const { accountId } = await storage.tokens.create(mintToken({ accountName: 'delivering' }).record)
        let create: Promise<unknown> | undefined
        await admin.begin(async (tx) => {
          await tx`LOCK TABLE plants IN ACCESS EXCLUSIVE MODE`
          let createAnswered = false
          create = storage.plants
            .create(accountId, { id: 1n, name: 'Fern', tag: null }, plantCreated)
            .finally(() => (createAnswered = true))
          // The pool's one connection is held once the create waits on the lock.
          await waitingOn(tx, 'the create')
          assert.deepEqual(await storage.webhooks.claimDeliveries(16, 60_000, 4), [])
          assert.equal(await storage.webhooks.countPendingDeliveries(), 0)
          assert.equal(createAnswered, false, 'the claim waited for the request before it')
        })
        assert.equal(await create, 'created')
        assert.deepEqual(await listPlants(storage.plants, accountId, { limit: 5 }), [
          { id: 1n, name: 'Fern', tag: null },
        ])
      } finally {
        await storage.close()
      }
    })

    test('stores the first write after its connection was ended mid-statement', async () => {
      // postgres.js 3.4.9 keeps the FATAL of a backend that ended under a running statement and rejects the next
      // connection's first statement with it, unsent (the fix is porsager/postgres#1215).
      const storage = await open(1)
      try {
        const { accountId } = await storage.tokens.create(mintToken({ accountName: 'first-after' }).record)
        const fern = (id: bigint) => ({ id, name: 'Fern', tag: null })
        await admin.begin(async (tx) => {
          await tx`LOCK TABLE plants IN ACCESS EXCLUSIVE MODE`
          const inFlight = storage.plants.create(accountId, fern(1n), plantCreated).then(
            () => assert.fail('the write whose connection ended was answered'),
            (err: Error) => err,
          )
          // Ended once it waits on the lock: it is then running, sent and not yet answered.
          const waiting = await waitingOn(tx, 'the write')
          await tx`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN ${tx(waiting)}`
          // Answered 503 as the connection's end (closed or reset, as the socket saw it), not with the FATAL: guard runs
          // work rejected with a FATAL again, safe only while a sent statement never gets one (see errors.ts).
          const failed = await inFlight
          assert.equal(failed.name, 'StorageUnavailableError')
          const cause = failed.cause as { code?: unknown; severity?: unknown }
          assert.ok(['CONNECTION_CLOSED', 'ECONNRESET'].includes(String(cause.code)), `${cause.code} ${cause.severity}`)
        })
        assert.equal(await storage.plants.create(accountId, fern(2n), plantCreated), 'created')
        assert.deepEqual(await listPlants(storage.plants, accountId, { limit: 5 }), [fern(2n)])
      } finally {
        await storage.close()
      }
    })

    test('survives its connections being ended mid-write, and serves on', async () => {
      // With sql.begin, the client's own ROLLBACK on a closed connection threw from a timer: the test process would
      // end with an uncaught TypeError instead of this test passing.
      const storage = await open()
      try {
        let killing = true
        const ended = new Set<number>()
        const killer = (async () => {
          while (killing) {
            const rows = await admin<{ pid: number; gone: boolean }[]>`SELECT pid, pg_terminate_backend(pid) AS gone
              FROM pg_stat_activity WHERE application_name = ${APP}`
            for (const { pid, gone } of rows) if (gone) ended.add(pid)
            await new Promise((resolve) => setTimeout(resolve, 15))
          }
        })()
        const outcomes = await Promise.allSettled(Array.from({ length: 30 }, (_, round) => burst(storage, 100 + round)))
        killing = false
        await killer
        assert.ok(
          outcomes.some((outcome) => outcome.status === 'rejected'),
          'the connections were ended under the writes',
        )
        // Every failure is the database being unavailable (answered 503), never another error.
        for (const outcome of outcomes) {
          if (outcome.status === 'rejected') assert.equal((outcome.reason as Error).name, 'StorageUnavailableError')
        }
        // Every ended backend has gone, so its goodbye reaches the client before the next writes do: none of them is
        // sent on a connection the client still takes for open.
        const deadline = Date.now() + 10_000
        while ((await admin`SELECT 1 FROM pg_stat_activity WHERE pid IN ${admin([...ended])}`).length > 0) {
          assert.ok(Date.now() < deadline, 'the ended sessions never went')
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
        // The first writes on the reconnected connections are kept too (see the test before).
        await burst(storage, 200)
        await burst(storage, 201)
      } finally {
        await storage.close()
      }
    })
  })
