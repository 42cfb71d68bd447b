import { StorageUnavailableError } from '../../errors.js'

// SQLite result codes that mean "the database cannot serve now", not "this query is wrong".
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|READONLY|IOERR|FULL|CANTOPEN|CORRUPT|NOTADB|PROTOCOL)/

/** Runs `fn`, turning database-unavailable errors into StorageUnavailableError. */
export function guard<T>(fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    const code = (err as { code?: unknown }).code
    if (typeof code === 'string' && UNAVAILABLE.test(code)) throw new StorageUnavailableError(err)
    throw err
  }
}
