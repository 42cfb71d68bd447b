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

/** Awaits `work`, turning database-unavailable errors into StorageUnavailableError. */
export async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    if (isUnavailable(err)) throw new StorageUnavailableError(err)
    throw err
  }
}
