import { existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'

/** How long a write waits for another process's lock before the request gets 503, unless told otherwise. */
export const BUSY_TIMEOUT_MS = 5000

// How long a readiness probe or a webhook claim waits for another process's write lock: neither is worth holding
// the event loop for the whole busy timeout (better-sqlite3 waits synchronously).
const SHORT_BUSY_TIMEOUT_MS = 100

/**
 * `mkdir -p`, one level at a time. Node's `mkdirSync(dir, { recursive: true })` spins forever at
 * 100% CPU when mkdir of a child says ENOENT although its parent exists (any path under /proc);
 * here that ENOENT is thrown instead.
 */
function makeDirectories(dir: string): void {
  const parent = dirname(dir)
  if (parent !== dir && !existsSync(parent)) makeDirectories(parent)
  try {
    mkdirSync(dir)
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'EEXIST' || !statSync(dir).isDirectory()) throw err
  }
}

const RETRY_PAUSE_MS = 5

/**
 * Switches a file to WAL, trying again until `busyTimeoutMs` has passed. Connections that switch a new file at the
 * same moment (servers and CLI commands started together) can deadlock on their lock upgrades; SQLite then answers
 * one of them SQLITE_BUSY at once, without calling the busy handler that waits.
 */
function enableWal(db: Database.Database, busyTimeoutMs: number): void {
  const deadline = Date.now() + busyTimeoutMs
  const pause = new Int32Array(new SharedArrayBuffer(4))
  for (;;) {
    try {
      db.pragma('journal_mode = WAL')
      return
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) throw err
      // Opening is synchronous; nothing else runs on this thread yet.
      Atomics.wait(pause, 0, 0, RETRY_PAUSE_MS)
    }
  }
}

/** Opens the SQLite file (creating folders as needed) in WAL mode with full fsync on commit. */
export function openDatabase(file: string, busyTimeoutMs: number): Database.Database {
  if (file !== ':memory:') makeDirectories(dirname(file))
  const db = new Database(file, { timeout: busyTimeoutMs })
  enableWal(db, busyTimeoutMs)
  // FULL: a commit is on disk before the client hears 200, even across power loss.
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  return db
}

/** Runs `fn` waiting at most SHORT_BUSY_TIMEOUT_MS for another process's write lock, then `busyTimeoutMs` again. */
export function briefly<T>(db: Database.Database, busyTimeoutMs: number, fn: () => T): T {
  db.pragma(`busy_timeout = ${SHORT_BUSY_TIMEOUT_MS}`)
  try {
    return fn()
  } finally {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`)
  }
}
