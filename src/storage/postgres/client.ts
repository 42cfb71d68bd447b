import postgres from 'postgres'

/** The pool, with int8 read and written as bigint. */
export type Sql = postgres.Sql<{ bigint: bigint }>
/** What query helpers take. */
export type Query = Sql

/**
 * One query per connection at a time. With pipelining (the default allows 100), requests beyond the pool are
 * queued on busy connections, and the client's queue bookkeeping then grows with every query under sustained
 * load: measured here, `select 1` at 50 concurrent fell from 30k/s to 7k/s within 30 s; with 1 it holds at
 * 70k/s. Extra requests wait in the client's own queue for a free connection instead. The option is read by
 * the client (its defaults list it) but missing from its type definitions, hence the spread.
 */
const ONE_QUERY_PER_CONNECTION = { max_pipeline: 1 }

/**
 * Seconds a pooled connection waits before its next connection attempt after a failed one. The client's default
 * grows to 20 s, and a request queued on that connection waits it out: with PostgreSQL stopped, requests took up
 * to 15 s to get their 503, and once it was back up to 20 s more to reach it. Capped at half a second (with
 * jitter), a request in an outage gets its 503 without that wait and the recovery is seen within a second. The
 * price: while a server is up but refusing (starting, or out of connections), each instance may try again every
 * half second per pooled connection that requests need, and each try costs that server a short-lived backend.
 */
export function reconnectDelaySeconds(failures: number): number {
  return Math.min(0.01 * 2 ** failures, 0.5) * (0.5 + Math.random() / 2)
}

/** How long a statement waits for a lock before failing with 55P03 (answered 503). */
export const LOCK_TIMEOUT_MS = 5000

/**
 * A lazily connecting pool of at most `poolSize` connections; other URL query parameters (search_path, sslmode,
 * statement_timeout...) reach the server, and so do `settings` (run-time parameters set as each connection opens).
 *
 * Every write is one statement. postgres.js 3.4.9 mishandles the client-side transactions of `sql.begin` and
 * `sql.reserve` under load and outages: BEGIN can be sent behind a running query without the connection being held
 * for it, so later statements of other requests run inside that transaction, answered and never committed
 * (porsager/postgres#1189); a statement sent on a held connection that closed throws from a timer and ends the
 * process (#1208); a held connection can be lost to the pool, or a wait for one never end, after a connection drops
 * (#1195). A single statement is atomic by itself and uses none of that.
 */
export function connect(url: string, poolSize: number, settings: Record<string, string> = {}): Sql {
  return postgres(url, {
    max: poolSize,
    ...ONE_QUERY_PER_CONNECTION,
    // Fail a request with 503 within seconds when the server is unreachable, instead of the 30 s default.
    connect_timeout: 5,
    backoff: reconnectDelaySeconds,
    types: { bigint: postgres.BigInt },
    // No array types to read at each connection: no statement passes an array, and the client runs that read
    // unawaited, so a connection ended during it made an unhandled rejection, which ends the process.
    fetch_types: false,
    // CREATE ... IF NOT EXISTS notices would otherwise go to console.log.
    onnotice: () => {},
    // A write waiting on a lock gives up after 5 s (503), like SQLite's busy timeout, instead of PostgreSQL's
    // default of waiting forever. The URL's query string may set another value.
    connection: { application_name: 'plantstore', lock_timeout: LOCK_TIMEOUT_MS, ...settings },
  })
}
