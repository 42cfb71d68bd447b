import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { mintToken } from '../../../src/auth/issue-token.js'
import { openStorage, type InstrumentedStorage } from '../../../src/storage/index.js'
import { plantCreated, plantDeleted } from '../../../src/webhooks/events.js'
import { POSTGRES_URL, postgresBackend, type TestDatabase } from '../../helpers/backends.js'
import { listPlants } from '../../helpers/plants.js'

const waitUntil = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 200 && !(await check()); i++) await new Promise((resolve) => setTimeout(resolve, 10))
}

// A create takes its count stripe's lock before the plant's id; a delete takes the plant's row before a stripe.
// Each test closes the cycle with a transaction of its own, which waits last and checks for deadlocks only after
// 60 s (deadlock_timeout, per session; the test's role is a superuser), so PostgreSQL's check, run by the storage's
// statement after its 1 s, always ends that statement: the storage must then run it again, not answer 503.
// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('PostgreSQL plant writes caught in a deadlock', () => {
    let database: TestDatabase
    let storage: InstrumentedStorage
    let other: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      storage = await openStorage(database.url, { migrate: true, poolSize: 2 })
      other = postgres(database.url, { max: 2, onnotice: () => {} })
    })
    after(async () => {
      await other.end()
      await storage.close()
      await database.dispose()
    })

    /** True once a statement of the storage waits for a lock. */
    const storageWaits = async () => {
      const [row] = await other<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()`
      return row!.n > 0
    }

    test('a delete that loses a deadlock to another writer is run again and deletes the plant', async () => {
      const { accountId } = await storage.tokens.create(mintToken({ accountName: 'deleter' }).record)
      await storage.plants.create(accountId, { id: 1n, name: 'Fern', tag: null }, plantCreated)
      const sql = await other.reserve()
      try {
        await sql`BEGIN`
        await sql`SET LOCAL deadlock_timeout = '60s'`
        await sql`INSERT INTO plant_counts (account_id, stripe, plants)
          SELECT ${accountId}, s, 0 FROM generate_series(0, 15) s
          ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants`
        const deleted = storage.plants.delete(accountId, 1n, plantDeleted).catch((err: Error) => err)
        await waitUntil(storageWaits)
        const closing = await sql`INSERT INTO plants (account_id, id, name) VALUES (${accountId}, 1, 'Other')`.catch(
          (err: Error) => err,
        )
        assert.ok(closing instanceof Error, 'the other writer meets the plant the delete has not deleted')
        await sql`ROLLBACK`
        assert.equal(await deleted, true)
      } finally {
        sql.release()
      }
      assert.deepEqual(await listPlants(storage.plants, accountId, { limit: 5 }), [])
    })

    test('a create that loses a deadlock to another writer is run again and finds the plant it raced', async () => {
      const { accountId } = await storage.tokens.create(mintToken({ accountName: 'creator' }).record)
      const sql = await other.reserve()
      try {
        await sql`BEGIN`
        await sql`SET LOCAL deadlock_timeout = '60s'`
        await sql`INSERT INTO plants (account_id, id, name) VALUES (${accountId}, 2, 'Other')`
        const created = storage.plants
          .create(accountId, { id: 2n, name: 'Fern', tag: null }, plantCreated)
          .catch((err: Error) => err)
        await waitUntil(storageWaits)
        await sql`INSERT INTO plant_counts (account_id, stripe, plants)
          SELECT ${accountId}, s, 0 FROM generate_series(0, 15) s
          ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + 1`
        await sql`COMMIT`
        assert.equal(await created, 'conflict')
      } finally {
        sql.release()
      }
    })
  })
