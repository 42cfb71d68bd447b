import { accessSync, closeSync, constants, existsSync, mkdirSync, openSync, statSync } from 'node:fs'
import { userInfo } from 'node:os'
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

/**
 * Creates the store's file, empty, readable and writable by its owner only, unless it exists: it holds token hashes
 * and webhook signing secrets, as backups and exports do. SQLite gives the -wal and -shm files it makes beside it
 * the same mode; on its own it would create all three 0644 (less the umask).
 */
function createOwnerOnly(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600))
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'EEXIST') throw err
  }
}

/** Who this process runs as, for an error message: "plantstore (uid 998)". */
function whoAmI(): string {
  const uid = process.getuid?.() ?? -1
  try {
    return `${userInfo().username} (uid ${uid})`
  } catch {
    return `uid ${uid}`
  }
}

/** `path` itself, or its nearest ancestor that exists. */
function nearestExisting(path: string): string {
  return existsSync(path) || dirname(path) === path ? path : nearestExisting(dirname(path))
}

/**
 * Why this process may not `action` `path` (access as `mode`), in words, or undefined when it may (or the check
 * fails otherwise).
 */
function denied(path: string, mode: number, action: string, noun: string): string | undefined {
  try {
    accessSync(path, mode)
    return undefined
  } catch (err) {
    const code = (err as { code?: unknown }).code
    if (code === 'EROFS') return `${noun} ${path} is on a read-only file system`
    if (code === 'EACCES' || code === 'EPERM')
      return `permission denied: user ${whoAmI()} may not ${action} ${noun} ${path}`
    return undefined
  }
}

// The errors that may mean the process lacks access: the file system's own, and SQLite's "unable to open" and
// "attempt to write a readonly database".
const ACCESS_ERROR = /^(EACCES|EPERM|EROFS|SQLITE_CANTOPEN|SQLITE_READONLY)/

/**
 * For a store that cannot be opened or created, the permission problem behind it, in words naming the folder or
 * file and the user: SQLite itself says only "unable to open database file". Undefined when access is not it.
 */
function accessProblem(file: string): string | undefined {
  const folder = nearestExisting(dirname(file))
  const inFolder = denied(folder, constants.W_OK | constants.X_OK, 'create files in', 'the folder')
  // The folder holds the store's -wal and -shm files too: with the store itself writable, it must be.
  if (inFolder !== undefined) return `${inFolder} (SQLite keeps the store and its -wal and -shm files there)`
  return existsSync(file) ? denied(file, constants.R_OK | constants.W_OK, 'read and write', 'the file') : undefined
}

/**
 * Opens the SQLite file (creating folders and the file, owner-only, as needed) in WAL mode with full fsync on
 * commit. A store it may not open or create fails with the permission problem named.
 */
export function openDatabase(file: string, busyTimeoutMs: number): Database.Database {
  if (file === ':memory:') return configure(new Database(file, { timeout: busyTimeoutMs }), busyTimeoutMs)
  try {
    makeDirectories(dirname(file))
    createOwnerOnly(file)
    return configure(new Database(file, { timeout: busyTimeoutMs }), busyTimeoutMs)
  } catch (err) {
    const problem = ACCESS_ERROR.test(String((err as { code?: unknown }).code)) ? accessProblem(file) : undefined
    throw problem === undefined ? err : new Error(problem, { cause: err })
  }
}

/** WAL mode, full fsync on commit, foreign keys: how every connection to a store runs. */
function configure(db: Database.Database, busyTimeoutMs: number): Database.Database {
  try {
    enableWal(db, busyTimeoutMs)
    // FULL: a commit is on disk before the client hears 200, even across power loss.
    db.pragma('synchronous = FULL')
    db.pragma('foreign_keys = ON')
    return db
  } catch (err) {
    db.close()
    throw err
  }
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
