import assert from 'node:assert/strict'
import { createHash, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { openStorage, type InstrumentedStorage } from '../../../src/storage/index.js'
import { NO_LIMITS } from '../../../src/storage/types.js'
import { POSTGRES_URL, postgresBackend, type TestDatabase } from '../../helpers/backends.js'

const fingerprint = createHash('sha256').update('the request').digest()

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('PostgreSQL idempotency claims racing on one key', () => {
    let database: TestDatabase
    let storage: InstrumentedStorage
    let other: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      storage = await openStorage(database.url, {
        migrate: true,
        limits: { ...NO_LIMITS, idempotencyKeysPerAccount: 1 },
      })
      other = postgres(database.url, { max: 1, onnotice: () => {} })
    })
    after(async () => {
      await other.end()
      await storage.close()
      await database.dispose()
    })

    const claim = (accountId: number, ttlMs = 3_600_000) =>
      storage.idempotency.claim({ accountId, key: 'k', fingerprint, lease: randomUUID(), ttlMs, leaseMs: 60_000 })

    test('a claim that waited on an expired key another claim took over says running, not the quota', async () => {
      const accountId = await storage.tokens.accountId('racer')
      await claim(accountId, 1)
      await sleep(20)
      // Another instance's claim, caught between taking the expired key over and its commit.
      let taken = () => {}
      const committed = new Promise<void>((resolve) => (taken = resolve))
      const holding = other.begin(async (tx) => {
        await tx`UPDATE idempotency_keys SET expires_at = now() + interval '1 hour', locked_until = now() + interval '1 minute',
          fingerprint = ${fingerprint}, lease = 'other', status = NULL, body = NULL WHERE account_id = ${accountId} AND key = 'k'`
        taken()
        await sleep(300)
      })
      await committed
      // Its snapshot sees the key expired and the account at its quota; it waits for the row, then finds it taken.
      const outcome = await claim(accountId)
      await holding
      assert.deepEqual(outcome, { state: 'running' })
    })
  })
