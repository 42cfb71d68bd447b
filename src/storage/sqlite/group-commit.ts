import type { Database, Transaction } from 'better-sqlite3'
import { StorageUnavailableError } from '../types.js'
import { translate } from './errors.js'

interface PendingWrite {
  write: () => unknown
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

// Bounds one transaction, so a flood of writes cannot hold the write lock (and the event loop) for long.
const MAX_BATCH = 256

/**
 * Group commit: writes queued in the same event-loop turn run in one IMMEDIATE transaction and share one
 * commit (one fsync with synchronous=FULL). Each caller's promise settles only after that commit, so nothing
 * is acknowledged before it is on disk. A write that throws (a constraint) is reported to its caller alone while
 * the others commit: SQLite undoes a failed statement by itself, so each write may make at most one change (one
 * modifying statement; reads around it are fine). Savepoints would lift that rule but cost as much as the insert
 * itself. When the database cannot serve (lock busy past the timeout, disk full, I/O error) the whole batch rolls
 * back and every write in it fails with StorageUnavailableError.
 */
export class GroupCommit {
  readonly #db: Database
  readonly #commit: Transaction<(batch: PendingWrite[]) => Outcome[]>
  #queue: PendingWrite[] = []
  #scheduled = false

  constructor(db: Database) {
    this.#db = db
    this.#commit = db.transaction((batch: PendingWrite[]) => batch.map((pending) => this.#attempt(pending)))
  }

  /** Queues `write` (synchronous SQL, one change at most) and resolves with its result once committed. */
  run<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ write, resolve: resolve as (value: unknown) => void, reject })
      this.#schedule()
    })
  }

  /** Commits everything queued now; close() calls it so no queued write is dropped. */
  flush(): void {
    while (this.#queue.length > 0) this.#commitBatch()
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    // After the poll phase: every request read in this turn joins the batch.
    setImmediate(() => {
      this.#scheduled = false
      this.#commitBatch()
      if (this.#queue.length > 0) this.#schedule()
    })
  }

  #commitBatch(): void {
    const batch = this.#queue.splice(0, MAX_BATCH)
    if (batch.length === 0) return
    let outcomes: Outcome[]
    try {
      // Inside an open transaction better-sqlite3 would run the batch as a savepoint: released, never committed.
      if (this.#db.inTransaction) throw new Error('group commit: the connection is already in a transaction')
      outcomes = this.#commit.immediate(batch)
    } catch (err) {
      const error = translate(err)
      for (const pending of batch) pending.reject(error)
      return
    }
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!
      if (outcome.ok) pending.resolve(outcome.value)
      else pending.reject(outcome.error)
    })
  }

  #attempt(pending: PendingWrite): Outcome {
    let value: unknown
    try {
      value = pending.write()
    } catch (err) {
      const error = translate(err)
      // Disk full, I/O errors, a lost lock: the whole batch rolls back and fails as one (SQLite may have rolled
      // it back already). Anything else (a constraint) is that write's own failure.
      if (error instanceof StorageUnavailableError || !this.#db.inTransaction) throw err
      return { ok: false, error }
    }
    // Its awaited part would run after the commit, outside the transaction.
    if (typeof (value as { then?: unknown } | null)?.then === 'function') {
      throw new TypeError('group commit: a write must be synchronous')
    }
    return { ok: true, value }
  }
}
