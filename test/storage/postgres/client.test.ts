import assert from 'node:assert/strict'
import { Socket } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { connect, endPool, type Sql } from '../../../src/storage/postgres/client.js'
import { POSTGRES_URL } from '../../helpers/backends.js'

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('PostgreSQL client', () => {
    const url = POSTGRES_URL!
    let sql: Sql
    before(async () => {
      sql = connect(url, 1)
      await sql`SELECT 1`
    })
    after(() => endPool(sql))

    // scripts/patch-postgres.js: as published, postgres.js held it until a setImmediate queued after this one.
    test('sends a query to the server in the turn it is issued, not a turn of the event loop later', async () => {
      const statement = 'SELECT $1::int AS n'
      // Prepared first, so that the query measured is one write (Bind, Execute, Sync), not Parse then Bind.
      await sql.unsafe(statement, [1], { prepare: true })
      let sent = 0
      const write = Socket.prototype.write
      // Every socket but the test runner's own output: the pool's one connection is the only other.
      Socket.prototype.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
        if (this !== process.stdout && this !== process.stderr) sent++
        return write.apply(this, args)
      } as Socket['write']
      try {
        const checked = new Promise<number>((resolve) => setImmediate(() => resolve(sent)))
        const answer = sql.unsafe<{ n: number }[]>(statement, [7], { prepare: true }).execute()
        assert.equal(await checked, 1, 'written before the next setImmediate ran')
        assert.deepEqual([...(await answer)], [{ n: 7 }])
      } finally {
        Socket.prototype.write = write
      }
    })
  })
