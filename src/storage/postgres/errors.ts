import { StorageUnavailableError } from '../types.js'

// postgres.js and socket error codes meaning the server cannot be reached or the connection dropped.
const CONNECTION_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
])

/**
 * SQLSTATEs meaning "cannot serve now, try again", not "this query is wrong": connection exceptions (08),
 * serialization failure and deadlock (40001, 40P01), insufficient resources (53), operator intervention
 * (57: shutdown, statement timeout), read-only replica (25006), lock not available (55P03).
 */
const UNAVAILABLE_STATE = /^(08|53|57|40001$|40P01$|25006$|55P03$)/

/** True when `err` says the database is unavailable rather than that the query is wrong. */
export function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && (CONNECTION_CODES.has(code) || UNAVAILABLE_STATE.test(code))
}

/**
 * True for an error postgres.js 3.4.9 gave a statement it never sent. A backend that ends while a statement runs
 * sends a FATAL and closes: the running statement is rejected with CONNECTION_CLOSED (or ECONNRESET), but the
 * client keeps the FATAL and rejects the first statement of the next connection it opens in that slot with it,
 * before sending it (porsager/postgres#1215). A FATAL otherwise reaches only a statement whose connection failed to
 * start. So a statement rejected with a FATAL did not run (test/storage/postgres/pool.test.ts checks both halves).
 */
function neverSent(err: unknown): boolean {
  return (err as { severity?: unknown }).severity === 'FATAL'
}

/**
 * Awaits `work`, turning database-unavailable errors into StorageUnavailableError. Work whose statement was
 * rejected unsent (see neverSent) runs once more, from its start: otherwise the first write after a reconnection
 * would fail with 503 though the database is back. Each guarded work is one statement, or steps that read what an
 * earlier run left (a plant's create), so running it again changes nothing that its first run did.
 */
export async function guard<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (err) {
      if (attempt === 1 && neverSent(err)) continue
      if (isUnavailable(err)) throw new StorageUnavailableError(err)
      throw err
    }
  }
}

const DEADLOCK = '40P01'
// Enough for the cycles a plant write can close (its count stripe and its plant, with one other writer each).
const DEADLOCK_RETRIES = 3

/**
 * Runs one statement, and runs it again when PostgreSQL ended it to break a deadlock (as its manual asks of
 * clients). A statement of its own is its own transaction, so the one ended left nothing behind.
 */
export async function retryingDeadlocks<T>(statement: () => PromiseLike<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await statement()
    } catch (err) {
      if ((err as { code?: unknown }).code !== DEADLOCK || attempt === DEADLOCK_RETRIES) throw err
    }
  }
}
