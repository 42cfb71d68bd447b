import assert from 'node:assert/strict'
import { createHash, randomUUID } from 'node:crypto'
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
    let watcher: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      storage = await openStorage(database.url, {
        migrate: true,
        limits: { ...NO_LIMITS, idempotencyKeysPerAccount: 1 },
      })
      other = postgres(database.url, { max: 1, onnotice: () => {} })
      watcher = postgres(database.url, { max: 1, onnotice: () => {} })
    })
    after(async () => {
      await watcher.end()
      await other.end()
      await storage.close()
      await database.dispose()
    })

    const claim = (accountId: number) =>
      storage.idempotency.claim({
        accountId,
        key: 'k',
        fingerprint,
        lease: randomUUID(),
        ttlMs: 3_600_000,
        leaseMs: 60_000,
      })

    /**
     * True once a session waits for a lock the session `holder` holds; false if `finished` says the awaited statement
     * ended first (it cannot end while waiting, and nothing here ends the holder's transaction before this returns).
     */
    async function waitsOn(holder: number, finished: () => boolean): Promise<boolean> {
      for (;;) {
        const done = finished()
        const [row] = await watcher<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE ${holder}::int = ANY(pg_blocking_pids(pid))`
        if (row!.n > 0) return true
        if (done) return false
      }
    }

    test('a claim that waited on an expired key another claim took over says running, not the quota', async () => {
      const accountId = await storage.tokens.accountId('racer')
      assert.deepEqual(await claim(accountId), { state: 'claimed' })
      // The account at its quota of one key, and that key expired: a claim may take it over.
      await other`UPDATE idempotency_keys SET expires_at = now() - interval '1 minute'
        WHERE account_id = ${accountId} AND key = 'k'`
      // Another instance's claim, held between taking the expired key over and its commit until the test says.
      let taken!: (pid: number) => void
      let commit!: () => void
      const holderPid = new Promise<number>((resolve) => (taken = resolve))
      const committing = new Promise<void>((resolve) => (commit = resolve))
      const holding = other.begin(async (tx) => {
        await tx`UPDATE idempotency_keys SET expires_at = now() + interval '1 hour', locked_until = now() + interval '1 minute',
          fingerprint = ${fingerprint}, lease = 'other', status = NULL, body = NULL WHERE account_id = ${accountId} AND key = 'k'`
        const [{ pid }] = await tx<[{ pid: number }]>`SELECT pg_backend_pid() AS pid`
        taken(pid)
        await committing
      })
      const holder = await holderPid
      // Its snapshot sees the key expired and the account at its quota; it waits for the row, then finds it taken.
      let finished = false
      const claiming = claim(accountId)
      void claiming.then(
        () => (finished = true),
        () => (finished = true),
      )
      const waited = await waitsOn(holder, () => finished)
      commit()
      await holding
      assert.ok(waited, "the claim ended without waiting for the other claim's lock: they did not interleave")
      assert.deepEqual(await claiming, { state: 'running' })
    })
  })
