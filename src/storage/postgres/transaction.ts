import type { ReservedSql, Sql } from './client.js'

/**
 * True for an error of the connection itself (closed, reset, timed out): postgres.js gives those an `errno`, as
 * Node gives socket errors; errors the server reported, and errors thrown by the transaction's own code, have none.
 */
function connectionLost(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'errno' in err
}

/**
 * Runs `work` in a transaction on a connection held for it alone: committed when `work` resolves, rolled back when
 * it throws. `mode` goes after BEGIN (`ISOLATION LEVEL SERIALIZABLE`).
 *
 * Not `sql.begin`, for two faults of postgres.js 3.4.9 that load and outages reach:
 * - its BEGIN can be sent behind a query running on a busy connection without that connection being held for the
 *   transaction (porsager/postgres#1189): the pool then gives the open transaction to later statements, which are
 *   answered but never committed (test/storage/postgres/transaction.test.ts makes it happen at once);
 * - a statement sent on a held connection after it closed, its own ROLLBACK included, throws from a timer and ends
 *   the process (porsager/postgres#1208).
 * So the connection is released only right after the server answered COMMIT or ROLLBACK, and after a connection
 * error nothing more is sent on it nor is it released: the client has already put it back in its pool as closed.
 * `work` must send its statements one after another and let a failed one end it, not catch it and go on.
 */
export async function transaction<T>(sql: Sql, work: (tx: ReservedSql) => Promise<T>, mode = ''): Promise<T> {
  const tx = await sql.reserve()
  try {
    await tx.unsafe(mode === '' ? 'BEGIN' : `BEGIN ${mode}`)
    const result = await work(tx)
    await tx`COMMIT`
    tx.release()
    return result
  } catch (err) {
    if (!connectionLost(err)) {
      await tx`ROLLBACK`.then(
        () => tx.release(),
        (rollbackErr: unknown) => connectionLost(rollbackErr) || tx.release(),
      )
    }
    throw err
  }
}
