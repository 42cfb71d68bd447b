import { StorageUnavailableError } from '../types.js'

// SQLite result codes that mean "the database cannot serve now", not "this query is wrong".
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|READONLY|IOERR|FULL|CANTOPEN|CORRUPT|NOTADB|PROTOCOL)/

/** The error callers should see: StorageUnavailableError for database-unavailable errors, else `err`. */
export function translate(err: unknown): unknown {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && UNAVAILABLE.test(code) ? new StorageUnavailableError(err) : err
}

/** Runs `fn`, turning database-unavailable errors into StorageUnavailableError. */
export function guard<T>(fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    throw translate(err)
  }
}
