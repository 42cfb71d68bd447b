import type { Database } from 'better-sqlite3'

/** Versioned schema changes, applied in order, each once. Never edit a released entry: add one. */
export const migrations: ReadonlyArray<{ version: number; sql: string }> = [
  {
    version: 1,
    sql: `
      CREATE TABLE accounts (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        secret_hash BLOB NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        label TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
      );
      CREATE TABLE plants (
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        id INTEGER NOT NULL,
        name TEXT NOT NULL,
        tag TEXT,
        PRIMARY KEY (account_id, id)
      ) WITHOUT ROWID;
      CREATE INDEX plants_by_tag ON plants (account_id, tag, id);
    `,
  },
  {
    version: 2,
    // One row, rewritten by readiness checks to learn whether the database takes writes again.
    sql: 'CREATE TABLE storage_probe (id INTEGER PRIMARY KEY, checked_at INTEGER NOT NULL);',
  },
  {
    version: 3,
    // Webhooks: subscriptions, and the outbox of deliveries written in the transaction of the plant change.
    sql: `
      CREATE TABLE webhook_subscriptions (
        id TEXT PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        url TEXT NOT NULL,
        secret TEXT NOT NULL,
        event_types TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX webhook_subscriptions_by_account ON webhook_subscriptions (account_id);
      CREATE TABLE webhook_deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        subscription_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        first_attempt_at INTEGER,
        lease TEXT,
        last_status INTEGER,
        last_error TEXT
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
      CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, state, id);
    `,
  },
]

/** Versions this release needs that the database lacks. */
export function pendingMigrations(db: Database): number[] {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get()
  const done = new Set(
    table === undefined ? [] : (db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]),
  )
  return migrations.filter((migration) => !done.has(migration.version)).map((migration) => migration.version)
}

/**
 * Applies pending migrations in one IMMEDIATE transaction, so a CLI and a server starting together are
 * safe; returns the versions applied.
 */
export function migrate(db: Database): number[] {
  if (pendingMigrations(db).length === 0) return []
  return db
    .transaction(() => {
      db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)')
      const record = db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)')
      const pending = pendingMigrations(db)
      for (const version of pending) {
        db.exec(migrations.find((migration) => migration.version === version)!.sql)
        record.run(version, Date.now())
      }
      return pending
    })
    .immediate()
}
