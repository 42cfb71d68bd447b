import type { Database, Statement } from 'better-sqlite3'
import type { HealthCheck } from '../types.js'
import { briefly } from './database.js'
import { guard } from './errors.js'

/** Whether the SQLite file answers, and takes writes. */
export class SqliteHealth implements HealthCheck {
  readonly #db: Database
  readonly #busyTimeoutMs: number
  readonly #probe: Statement

  constructor(db: Database, busyTimeoutMs: number) {
    this.#db = db
    this.#busyTimeoutMs = busyTimeoutMs
    this.#probe = db.prepare(
      'INSERT INTO storage_probe (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at',
    )
  }

  async ping(): Promise<void> {
    guard(() => this.#db.prepare('SELECT 1').get())
  }

  async probeWrite(): Promise<void> {
    // Its own short commit, outside the group: better-sqlite3 waits for another process's lock synchronously, and
    // a readiness check must not hold the event loop for the whole busy timeout; a lock held longer is the answer.
    briefly(this.#db, this.#busyTimeoutMs, () => guard(() => this.#probe.run(Date.now())))
  }
}
