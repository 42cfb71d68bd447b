import postgres from 'postgres'
import { hostRotation, type PoolSockets } from './hosts.js'

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

/**
 * The `target_session_attrs` to hand the client for the one a URL (or PGTARGETSESSIONATTRS) asks for. postgres.js
 * 3.4.9 takes `read-write` to mean "default_transaction_read_only is off", which a hot standby of PostgreSQL 14 or
 * later also reports (it refuses writes through in_hot_standby instead): with a multi-host URL, a connection that
 * reached the standby stayed there and every write on it failed (25006), even with the primary up. `primary` checks
 * in_hot_standby, as libpq's read-write does; not libpq's other half, a primary set default_transaction_read_only,
 * whose writes then answer 503 (25006) rather than go to another host.
 */
export function sessionAttributes(url: string): 'primary' | undefined {
  const asked =
    new URLSearchParams(url.split('?')[1] ?? '').get('target_session_attrs') ?? process.env.PGTARGETSESSIONATTRS
  return asked === 'read-write' ? 'primary' : undefined
}

/** How each pool over several hosts tells its rotation that it is ending (see endPool). */
const poolEnds = new WeakMap<Sql, () => void>()

/** For a URL naming several hosts: the client dials them through a HostRotation (see there why), given only the first. */
function hostsOf(url: string): (PoolSockets & { host: string; port: number }) | undefined {
  const rotation = hostRotation(url)
  if (rotation === undefined) return undefined
  return { ...rotation.first, ...rotation.forPool() }
}

/** Ends a pool from connect(), dropping a connection that does not say goodbye within `timeout` seconds. */
export async function endPool(sql: Sql, timeout = 1): Promise<void> {
  // Before the client closes its sockets: their closes are the pool's, not a host refusing it.
  poolEnds.get(sql)?.()
  await sql.end({ timeout })
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
 * (#1195). A single statement is atomic by itself and uses none of that. `lifetime` overrides the client's
 * default max_lifetime (a connection replaced after 30 to 60 minutes), for one that must outlive it.
 */
export function connect(
  url: string,
  poolSize: number,
  settings: Record<string, string> = {},
  lifetime: Pick<postgres.Options<Record<string, never>>, 'max_lifetime'> = {},
): Sql {
  const hosts = hostsOf(url)
  const sql = postgres(url, {
    ...lifetime,
    // The socket option is read by the client but missing from its type definitions, hence the spread.
    ...(hosts && { host: hosts.host, port: hosts.port, socket: hosts.socket }),
    max: poolSize,
    ...ONE_QUERY_PER_CONNECTION,
    target_session_attrs: sessionAttributes(url),
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
  if (hosts) poolEnds.set(sql, hosts.ending)
  return sql
}
