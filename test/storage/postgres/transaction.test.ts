import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { connect, type Sql } from '../../../src/storage/postgres/client.js'
import { transaction } from '../../../src/storage/postgres/transaction.js'
import { POSTGRES_URL, postgresBackend, type TestDatabase } from '../../helpers/backends.js'

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('transactions on the PostgreSQL pool', () => {
    let database: TestDatabase
    let sql: Sql
    let admin: postgres.Sql
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      admin = postgres(database.url, { max: 1, onnotice: () => {} })
      await admin`CREATE TABLE notes (n integer NOT NULL)`
    })
    after(async () => {
      await sql?.end({ timeout: 1 })
      await admin.end()
      await database.dispose()
    })

    test('commits every acknowledged write while transactions and single statements share a busy pool', async () => {
      sql = connect(database.url, 2)
      let acknowledged = 0
      for (let round = 0; round < 20; round++) {
        const work: Array<Promise<unknown>> = []
        for (let i = 0; i < 10; i++) {
          // A statement keeping a connection busy, a transaction and a plain write, over and over: with sql.begin,
          // BEGIN lands behind the busy statement on a connection that is not held for it.
          work.push(sql`SELECT pg_sleep(0.001)`)
          work.push(transaction(sql, async (tx) => tx`INSERT INTO notes VALUES (1)`).then(() => acknowledged++))
          work.push(sql`INSERT INTO notes VALUES (2)`.then(() => acknowledged++))
        }
        await Promise.all(work)
      }
      const [seen] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM notes`
      assert.equal(seen!.n, acknowledged, 'another session sees every write that was answered')
      const [open] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE application_name = 'plantstore' AND state LIKE 'idle in transaction%'`
      assert.equal(open!.n, 0, 'no connection is left inside a transaction')
      await sql.end({ timeout: 1 })
    })

    test('a rolled-back transaction leaves nothing and its connection serves the next statement', async () => {
      sql = connect(database.url, 1)
      await admin`TRUNCATE notes`
      await assert.rejects(
        transaction(sql, async (tx) => {
          await tx`INSERT INTO notes VALUES (3)`
          throw new Error('changed my mind')
        }),
        /changed my mind/,
      )
      const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM notes`
      assert.equal(row!.n, 0)
      await sql.end({ timeout: 1 })
    })

    test('survives the server ending the connection mid-transaction, and the pool serves on', async () => {
      // With sql.begin the client's own ROLLBACK on the closed connection throws from a timer: the test process
      // would end with an uncaught TypeError instead of this test passing.
      sql = connect(database.url, 1)
      for (let round = 0; round < 3; round++) {
        const attempt = transaction(sql, async (tx) => {
          const [backend] = await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
          await admin`SELECT pg_terminate_backend(${backend!.pid})`
          await tx`SELECT pg_sleep(1)`
        })
        await assert.rejects(attempt, (err: { errno?: unknown }) => err.errno !== undefined)
        // A timer firing on the closed connection would come after the rejection: give it the time to.
        await new Promise((resolve) => setTimeout(resolve, 50))
        // The first statement on the reconnected connection may still get the old backend's 57P01 (the client keeps
        // that error across the reconnection, porsager/postgres#1215): answered 503 like any outage, then gone.
        const one = () => sql<{ one: number }[]>`SELECT 1 AS one`
        const [row] = await one().catch((err: { code?: string }) => {
          assert.equal(err.code, '57P01')
          return one()
        })
        assert.equal(row!.one, 1, `round ${round}: the pool reconnects`)
        await transaction(sql, async (tx) => tx`INSERT INTO notes VALUES (4)`)
      }
      await sql.end({ timeout: 1 })
    })
  })
