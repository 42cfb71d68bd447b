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
  {
    version: 4,
    // Quotas and fair delivery. plant_counts: plants per account, kept by triggers in the statement that changes
    // plants (one stripe here; PostgreSQL spreads an account over several to avoid one hot row). Subscriptions get
    // a state, their queue length, and the backoff and lease of their next attempt: claims read subscriptions that
    // are ready, never the queued rows behind them. webhook_attempts: the last attempts of each subscription, a ring.
    sql: `
      CREATE TABLE plant_counts (
        account_id INTEGER NOT NULL,
        stripe INTEGER NOT NULL,
        plants INTEGER NOT NULL,
        PRIMARY KEY (account_id, stripe)
      ) WITHOUT ROWID;
      INSERT INTO plant_counts (account_id, stripe, plants) SELECT account_id, 0, count(*) FROM plants GROUP BY account_id;
      CREATE TRIGGER plants_counted_on_insert AFTER INSERT ON plants BEGIN
        INSERT INTO plant_counts (account_id, stripe, plants) VALUES (NEW.account_id, 0, 1)
          ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plants + 1;
      END;
      CREATE TRIGGER plants_counted_on_delete AFTER DELETE ON plants BEGIN
        UPDATE plant_counts SET plants = plants - 1 WHERE account_id = OLD.account_id AND stripe = 0;
      END;
      DELETE FROM webhook_deliveries WHERE subscription_id NOT IN (SELECT id FROM webhook_subscriptions);
      ALTER TABLE webhook_subscriptions ADD COLUMN state TEXT NOT NULL DEFAULT 'active';
      ALTER TABLE webhook_subscriptions ADD COLUMN disabled_reason TEXT;
      ALTER TABLE webhook_subscriptions ADD COLUMN disabled_at INTEGER;
      ALTER TABLE webhook_subscriptions ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE webhook_subscriptions ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE webhook_subscriptions ADD COLUMN lease TEXT;
      ALTER TABLE webhook_subscriptions ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE webhook_subscriptions ADD COLUMN failing_since INTEGER;
      ALTER TABLE webhook_subscriptions ADD COLUMN attempts_made INTEGER NOT NULL DEFAULT 0;
      UPDATE webhook_subscriptions SET queued = (SELECT count(*) FROM webhook_deliveries d
        WHERE d.subscription_id = webhook_subscriptions.id AND d.state = 'pending');
      CREATE INDEX webhook_subscriptions_ready ON webhook_subscriptions (next_attempt_at)
        WHERE state = 'active' AND queued > 0;
      CREATE INDEX webhook_subscriptions_leased ON webhook_subscriptions (account_id) WHERE lease IS NOT NULL;
      ALTER TABLE webhook_deliveries ADD COLUMN failed_at INTEGER;
      UPDATE webhook_deliveries SET failed_at = next_attempt_at, lease = NULL WHERE state = 'failed';
      DROP INDEX webhook_deliveries_due;
      CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (failed_at) WHERE state = 'failed';
      CREATE TABLE webhook_attempts (
        subscription_id TEXT NOT NULL,
        slot INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        outcome TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        status INTEGER,
        error TEXT,
        PRIMARY KEY (subscription_id, slot)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 5,
    // Disabling a subscription marks it only; its queue is failed afterwards in batches (settleDisabled), which
    // find the subscriptions still to settle through this index instead of reading every subscription.
    sql: `
      CREATE INDEX webhook_subscriptions_settling ON webhook_subscriptions (id) WHERE state = 'disabled' AND queued > 0;
    `,
  },
  {
    version: 6,
    // Tokens made over HTTP are capped per account, counted at each create through this index.
    sql: `
      CREATE INDEX tokens_by_account ON tokens (account_id);
    `,
  },
  {
    version: 7,
    // Token lineage: the id of the token that made a token over HTTP; existing tokens had no maker (null). No foreign
    // key: deleting a maker keeps the rows it made (revoked) with its id, so a listing still names it. The index
    // finds what a token made when it is revoked or deleted.
    sql: `
      ALTER TABLE tokens ADD COLUMN created_by TEXT;
      CREATE INDEX tokens_by_maker ON tokens (created_by) WHERE created_by IS NOT NULL;
    `,
  },
  {
    version: 8,
    // PostgreSQL's 8 holds the plants quota per stripe of its counts. Here one writer at a time checks the count in
    // the insert, so the quota is exact already: the counts are only recomputed, as PostgreSQL's are.
    sql: `
      DELETE FROM plant_counts;
      INSERT INTO plant_counts (account_id, stripe, plants) SELECT account_id, 0, count(*) FROM plants GROUP BY account_id;
    `,
  },
  {
    version: 9,
    // Idempotency keys: each request's claim and then its answer, per account, until it expires. Their count per
    // account, kept by triggers as plant_counts is, holds the quota; the index finds expired keys to purge.
    sql: `
      CREATE TABLE idempotency_keys (
        account_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        fingerprint BLOB NOT NULL,
        lease TEXT NOT NULL,
        locked_until INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        status INTEGER,
        body TEXT,
        PRIMARY KEY (account_id, key)
      ) WITHOUT ROWID;
      CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
      CREATE TABLE idempotency_key_counts (account_id INTEGER PRIMARY KEY, keys INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TRIGGER idempotency_keys_counted_on_insert AFTER INSERT ON idempotency_keys BEGIN
        INSERT INTO idempotency_key_counts (account_id, keys) VALUES (NEW.account_id, 1)
          ON CONFLICT (account_id) DO UPDATE SET keys = keys + 1;
      END;
      CREATE TRIGGER idempotency_keys_counted_on_delete AFTER DELETE ON idempotency_keys BEGIN
        UPDATE idempotency_key_counts SET keys = keys - 1 WHERE account_id = OLD.account_id;
      END;
    `,
  },
  {
    version: 10,
    // The W3C trace context of the change that wrote each event, so that its deliveries continue the change's trace.
    sql: 'ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;',
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
