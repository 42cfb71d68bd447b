import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { mintToken } from '../../../src/auth/issue-token.js'
import { openStorage, type InstrumentedStorage } from '../../../src/storage/index.js'
import { plantCreated, plantDeleted } from '../../../src/webhooks/events.js'
import { POSTGRES_URL, postgresBackend, type TestDatabase } from '../../helpers/backends.js'

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('PostgreSQL plant count stripes', () => {
    let database: TestDatabase
    let other: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      other = postgres(database.url, { max: 1, onnotice: () => {} })
    })
    after(async () => {
      await other.end()
      await database.dispose()
    })

    const open = (plantsPerAccount: number) =>
      openStorage(database.url, {
        migrate: true,
        poolSize: 1,
        limits: {
          plantsPerAccount,
          subscriptionsPerAccount: 2,
          queuedPerSubscription: 3,
          idempotencyKeysPerAccount: 0,
        },
      })
    const stripes = async (accountId: number) =>
      other<{ stripe: number; plants: string }[]>`SELECT stripe, plants FROM plant_counts
        WHERE account_id = ${accountId} AND plants <> 0 ORDER BY stripe`

    test('creates and deletes on one connection keep to one stripe, so connections do not queue on each other', async () => {
      const storage: InstrumentedStorage = await open(1000)
      try {
        const { accountId } = await storage.tokens.create(mintToken({ accountName: 'striped' }).record)
        for (let id = 1n; id <= 24n; id++) {
          await storage.plants.create(accountId, { id, name: 'Fern', tag: null }, plantCreated)
        }
        for (let id = 1n; id <= 4n; id++) await storage.plants.delete(accountId, id, plantDeleted)
        const counted = await stripes(accountId)
        assert.equal(counted.length, 1, `one stripe counts every plant: ${JSON.stringify(counted)}`)
        assert.equal(counted[0]!.plants, '20')
      } finally {
        await storage.close()
      }
    })

    test('a connection whose own stripe is full moves to another with room, up to the quota exactly', async () => {
      const storage: InstrumentedStorage = await open(20)
      try {
        const { accountId } = await storage.tokens.create(mintToken({ accountName: 'spilled' }).record)
        const outcomes = []
        for (let id = 1n; id <= 21n; id++) {
          outcomes.push(
            await storage.plants
              .create(accountId, { id, name: 'Fern', tag: null }, plantCreated)
              .catch((err: Error) => err.name),
          )
        }
        assert.deepEqual(outcomes.slice(0, 20), Array(20).fill('created'))
        assert.equal(outcomes[20], 'QuotaExceededError')
        const counted = await stripes(accountId)
        assert.equal(counted.length, 16, 'every stripe filled to its share')
        assert.equal(
          counted.reduce((sum, row) => sum + Number(row.plants), 0),
          20,
        )
      } finally {
        await storage.close()
      }
    })
  })
