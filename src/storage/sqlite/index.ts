import { migrateOrCheck } from '../schema.js'
import { NO_LIMITS, type OpenOptions, type Storage } from '../types.js'
import { BUSY_TIMEOUT_MS, openDatabase } from './database.js'
import { guard } from './errors.js'
import { GroupCommit } from './group-commit.js'
import { SqliteHealth } from './health.js'
import { SqliteIdempotency } from './idempotency.js'
import { migrate, pendingMigrations } from './migrations.js'
import { SqlitePlants } from './plants.js'
import { SqliteTokens } from './tokens.js'
import { SqliteWebhooks } from './webhooks.js'

/**
 * Opens storage on an embedded SQLite file through better-sqlite3, migrating it or checking that it is current as
 * `options.migrate` says. `busyTimeoutMs`: how long a write waits for another process's lock before it fails with
 * 503 (5 s unless told).
 */
export async function open(file: string, options: OpenOptions & { busyTimeoutMs?: number }): Promise<Storage> {
  const busyTimeoutMs = options.busyTimeoutMs ?? BUSY_TIMEOUT_MS
  const db = guard(() => openDatabase(file, busyTimeoutMs))
  let migrationsApplied: number[]
  try {
    migrationsApplied = await migrateOrCheck(options.migrate, {
      apply: () => guard(() => migrate(db)),
      pending: () => guard(() => pendingMigrations(db)),
    })
  } catch (err) {
    db.close()
    throw err
  }
  const limits = options.limits ?? NO_LIMITS
  const writes = new GroupCommit(db)
  const webhooks = new SqliteWebhooks(db, writes, limits, busyTimeoutMs)
  return {
    plants: new SqlitePlants(db, writes, webhooks, limits),
    tokens: new SqliteTokens(db),
    webhooks,
    idempotency: new SqliteIdempotency(db, writes, limits),
    health: new SqliteHealth(db, busyTimeoutMs),
    migrationsApplied,
    async close() {
      if (!db.open) return
      // Writes still queued for the group commit are committed, not dropped.
      writes.flush()
      db.close()
    },
  }
}
