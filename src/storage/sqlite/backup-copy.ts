/*
 * The copying half of a SQLite backup (backup.ts starts it): run on a thread of its own, since VACUUM INTO, the
 * integrity check and the counts are synchronous calls that take seconds on a large store, and the main thread
 * keeps showing progress meanwhile.
 */
import { constants, setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import Database from 'better-sqlite3'

/** What the thread is given: the store, the (empty, already created) temporary file, the store's busy timeout. */
export interface CopyRequest {
  source: string
  temp: string
  busyTimeoutMs: number
}

/** What the copy holds, counted in the copy. */
export interface CopyCounts {
  plants: number
  accounts: number
  tokens: number
  subscriptions: number
}

/** The thread's messages, in order: the size to expect, the check begun, then done or failed. */
export type CopyMessage =
  | { kind: 'total'; bytes: number }
  | { kind: 'checking' }
  | { kind: 'done'; counts: CopyCounts }
  | { kind: 'failed'; message: string }

// The tables counted, by what the summary calls them.
const COUNTED: ReadonlyArray<[keyof CopyCounts, string]> = [
  ['plants', 'plants'],
  ['accounts', 'accounts'],
  ['tokens', 'tokens'],
  ['subscriptions', 'webhook_subscriptions'],
]

// Lines of a failed integrity check quoted in the error: the first few say what is wrong.
const PROBLEMS_QUOTED = 3

const request = workerData as CopyRequest
const post = (message: CopyMessage): void => parentPort!.postMessage(message)

function hasTable(db: Database.Database, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined
}

/**
 * VACUUM INTO rather than the online backup API (sqlite3_backup_*, better-sqlite3's db.backup()): it reads the
 * store in one statement, so in one read transaction, one snapshot: in WAL mode the servers' writes go on meanwhile,
 * and the copy holds exactly what was committed when it began. A step-wise backup instead starts over whenever
 * another connection (a serving process) writes between two steps, so under steady writes it may never end. The
 * copy is also compact (no free pages) and in rollback-journal mode: one self-contained file, no -wal or -shm to
 * carry; a service opening it switches it to WAL as it does any store. It costs more CPU than a page copy (the
 * indexes are rebuilt), which is why it runs on this thread of its own.
 */
function copyStore(): void {
  const source = new Database(request.source, { fileMustExist: true, timeout: request.busyTimeoutMs })
  try {
    if (!hasTable(source, 'schema_migrations')) throw new Error('it is not a plantstore store (no schema_migrations)')
    const pages =
      (source.pragma('page_count', { simple: true }) as number) -
      (source.pragma('freelist_count', { simple: true }) as number)
    post({ kind: 'total', bytes: pages * (source.pragma('page_size', { simple: true }) as number) })
    source.prepare('VACUUM INTO ?').run(request.temp)
  } finally {
    source.close()
  }
}

/** Checks the copy (PRAGMA integrity_check) and counts what it holds; throws naming the first problems found. */
function checkCopy(): CopyCounts {
  const copy = new Database(request.temp, { readonly: true, fileMustExist: true })
  try {
    const problems = (copy.pragma('integrity_check') as Array<{ integrity_check: string }>)
      .map((row) => row.integrity_check)
      .filter((line) => line !== 'ok')
    if (problems.length > 0) {
      throw new Error(`the copy failed its integrity check: ${problems.slice(0, PROBLEMS_QUOTED).join('; ')}`)
    }
    const counts: CopyCounts = { plants: 0, accounts: 0, tokens: 0, subscriptions: 0 }
    for (const [key, table] of COUNTED) {
      // A store from before a table's migration holds none of it.
      if (hasTable(copy, table)) counts[key] = copy.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number
    }
    return counts
  } finally {
    copy.close()
  }
}

// The servers come first: on a busy machine this thread takes only the CPU they leave (Linux: this thread alone;
// elsewhere the process), and on an idle one it runs at full speed all the same.
setPriority(constants.priority.PRIORITY_LOW)

try {
  copyStore()
  post({ kind: 'checking' })
  post({ kind: 'done', counts: checkCopy() })
} catch (err) {
  post({ kind: 'failed', message: err instanceof Error ? err.message : String(err) })
}
