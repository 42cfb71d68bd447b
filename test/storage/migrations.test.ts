import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import Database from 'better-sqlite3'
import postgres from 'postgres'
import { mintToken } from '../../src/auth/issue-token.js'
import {
  MigrationsPendingError,
  openStorage,
  sqliteFile,
  type OpenOptions,
  type Storage,
} from '../../src/storage/index.js'
import { migrations as postgresMigrations } from '../../src/storage/postgres/migrations.js'
import { migrations as sqliteMigrations } from '../../src/storage/sqlite/migrations.js'
import { backends, POSTGRES_URL, postgresBackend, type TestBackend } from '../helpers/backends.js'
import { plantCreated } from '../../src/webhooks/events.js'
import { listPlants } from '../helpers/plants.js'

const LATEST = sqliteMigrations.map((migration) => migration.version)

test('both backends carry the same migration versions', () => {
  assert.deepEqual(
    postgresMigrations.map((migration) => migration.version),
    LATEST,
  )
})

/**
 * A fresh database of `backend` and a way to open storages on it, all closed (even after a failed
 * assertion, so open pools cannot keep the test process alive) and the database removed afterwards.
 */
async function withDatabase(
  backend: TestBackend,
  fn: (url: string, open: (options?: OpenOptions) => Promise<Storage>) => Promise<void>,
): Promise<void> {
  const database = await backend.createDatabase()
  const opened: Storage[] = []
  const open = async (options?: OpenOptions) => {
    const storage = await openStorage(database.url, options)
    opened.push(storage)
    return storage
  }
  try {
    await fn(database.url, open)
  } finally {
    await Promise.allSettled(opened.map((storage) => storage.close()))
    await database.dispose()
  }
}

/** Opens `count` storages at once; the settled ones are closed by withDatabase even when one fails. */
async function openAtOnce(open: () => Promise<Storage>, count: number): Promise<Storage[]> {
  const results = await Promise.allSettled(Array.from({ length: count }, () => open()))
  const failed = results.find((result) => result.status === 'rejected')
  if (failed !== undefined) throw failed.reason
  return results.map((result) => (result as PromiseFulfilledResult<Storage>).value)
}

/** Undoes every migration after 1 on the database at `url`, leaving it as the first release left it. */
async function backToVersion1(url: string): Promise<void> {
  const file = sqliteFile(url)
  if (file !== undefined) {
    const db = new Database(file)
    db.exec('DROP TABLE storage_probe; DROP TABLE webhook_subscriptions; DROP TABLE webhook_deliveries')
    db.exec('DROP TABLE plant_counts; DROP TABLE webhook_attempts; DROP TABLE idempotency_keys')
    db.exec('DROP TABLE idempotency_key_counts')
    db.exec('DROP TRIGGER plants_counted_on_insert; DROP TRIGGER plants_counted_on_delete')
    db.exec('DROP INDEX tokens_by_account; DROP INDEX tokens_by_maker; ALTER TABLE tokens DROP COLUMN created_by')
    db.exec('DELETE FROM schema_migrations WHERE version > 1')
    db.close()
    return
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  // Closed even when a statement fails, so that an open connection cannot keep the test process alive.
  try {
    await sql.unsafe(
      'DROP TABLE storage_probe, webhook_subscriptions, webhook_deliveries, plant_counts, webhook_attempts, idempotency_keys, idempotency_key_counts',
    )
    await sql.unsafe('ALTER TABLE accounts DROP COLUMN subscriptions, DROP COLUMN tokens')
    await sql.unsafe('DROP INDEX tokens_by_account, tokens_by_maker')
    await sql.unsafe('ALTER TABLE tokens DROP COLUMN created_by')
    await sql.unsafe('DELETE FROM schema_migrations WHERE version > 1')
  } finally {
    await sql.end()
  }
}

/**
 * Writes, with the third release's schema (migrations 1 to 3 only), account `a` with two plants and a subscription
 * with two pending deliveries, as that release left them.
 */
async function atVersion3(url: string): Promise<void> {
  const file = sqliteFile(url)
  const rows = [
    `INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', ${file ? 0 : 'now()'})`,
    "INSERT INTO plants (account_id, id, name) VALUES (1, 1, 'x'), (1, 2, 'y')",
    `INSERT INTO webhook_subscriptions (id, account_id, url, secret, event_types, created_at)
      VALUES ('whk_0000000000000001', 1, 'http://127.0.0.1:9/hook', 'whsec_AAAA', 'plant.created', ${file ? 0 : 'now()'})`,
    ...[1, 2].map(
      (id) => `INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
        VALUES ('whk_0000000000000001', 'msg_${id}', 'plant.created', '{}', ${file ? '0, 0' : 'now(), now()'})`,
    ),
  ]
  const schema = (file ? sqliteMigrations : postgresMigrations).filter((migration) => migration.version <= 3)
  const versions = schema.map(
    (migration) =>
      `INSERT INTO schema_migrations (version, applied_at) VALUES (${migration.version}, ${file ? 0 : 'now()'})`,
  )
  const script = [
    'CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at ' +
      (file ? 'INTEGER NOT NULL)' : 'timestamptz NOT NULL DEFAULT now())'),
    ...schema.map((migration) => migration.sql),
    ...versions,
    ...rows,
  ]
  if (file !== undefined) {
    const db = new Database(file)
    for (const statement of script) db.exec(statement)
    db.close()
    return
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  for (const statement of script) await sql.unsafe(statement)
  await sql.end()
}

for (const backend of backends) {
  describe(`migrations and first start (${backend.name})`, () => {
    test('upgrades a database of the third release: its plants count toward the quota, its queue keeps its count', () =>
      withDatabase(backend, async (url) => {
        await atVersion3(url)
        const upgraded = await openStorage(url, {
          migrate: true,
          limits: {
            plantsPerAccount: 3,
            subscriptionsPerAccount: 10,
            queuedPerSubscription: 100,
            idempotencyKeysPerAccount: 0,
          },
        })
        try {
          const later = (sqliteFile(url) ? sqliteMigrations : postgresMigrations).filter((m) => m.version > 3)
          assert.deepEqual(
            upgraded.migrationsApplied,
            later.map((migration) => migration.version),
          )
          const [subscription] = await upgraded.webhooks.listSubscriptions({ accountName: 'a' })
          assert.equal(subscription?.queued, 2)
          assert.equal(subscription?.state, 'active')
          assert.equal(await upgraded.webhooks.countPendingDeliveries(), 2)
          assert.equal(await upgraded.plants.create(1, { id: 3n, name: 'z', tag: null }, plantCreated), 'created')
          await assert.rejects(
            upgraded.plants.create(1, { id: 4n, name: 'w', tag: null }, plantCreated),
            /quota of 3 plants/,
          )
          assert.equal(
            (await upgraded.webhooks.claimDeliveries(16, 60_000, 4)).map((claimed) => claimed.eventId).join(),
            'msg_1',
          )
        } finally {
          await upgraded.close()
        }
      }))

    test('refuses to open an unmigrated database when told not to migrate, naming the pending versions', () =>
      withDatabase(backend, async (url, open) => {
        await assert.rejects(openStorage(url, { migrate: false }), (err: unknown) => {
          assert.ok(err instanceof MigrationsPendingError)
          assert.deepEqual(err.pending, LATEST)
          assert.match(err.message, /plantstore migrate/)
          return true
        })
        assert.deepEqual((await open({ migrate: true })).migrationsApplied, LATEST)
        assert.deepEqual((await open({ migrate: false })).migrationsApplied, [])
      }))

    test('upgrades a database of the first release, keeping its plants and its tokens valid, made by no token', () =>
      withDatabase(backend, async (url, open) => {
        const old = await open()
        const { record } = mintToken({ accountName: 'a' })
        const token = await old.tokens.create(record)
        await old.plants.create(token.accountId, { id: 1n, name: 'x', tag: null }, plantCreated)
        await old.close()
        await backToVersion1(url)
        const upgraded = await open()
        assert.deepEqual(upgraded.migrationsApplied, LATEST.slice(1))
        await upgraded.health.probeWrite()
        assert.deepEqual(await listPlants(upgraded.plants, token.accountId, { limit: 10 }), [
          { id: 1n, name: 'x', tag: null },
        ])
        assert.equal(await upgraded.tokens.count(), 1)
        const kept = await upgraded.tokens.find(record.secretHash)
        assert.equal(kept?.id, token.id)
        assert.equal(kept.revokedAt, null)
        assert.equal(kept.createdBy, null)
      }))

    test('applies migrations exactly once when several instances open an empty database at once', () =>
      withDatabase(backend, async (_url, open) => {
        const stores = await openAtOnce(open, 4)
        assert.deepEqual(
          stores.map((store) => store.migrationsApplied).filter((versions) => versions.length > 0),
          [LATEST],
        )
      }))

    test('creates the first token exactly once when several instances race on an empty store', () =>
      withDatabase(backend, async (_url, open) => {
        const stores = await openAtOnce(open, 4)
        const created = await Promise.all(
          stores.flatMap((store) =>
            [1, 2].map(() => store.tokens.createFirst(mintToken({ accountName: 'default' }).record)),
          ),
        )
        assert.equal(created.filter((token) => token !== undefined).length, 1)
        assert.equal(await stores[0]!.tokens.count(), 1)
        assert.equal(await stores[0]!.tokens.createFirst(mintToken({ accountName: 'x' }).record), undefined)
      }))
  })
}

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('least privilege (postgres)', () => {
    test('serves with a role that has only USAGE and SELECT/INSERT/UPDATE/DELETE once migrated', async () => {
      const database = await postgresBackend(POSTGRES_URL!).createDatabase()
      const schema = new URL(database.url).searchParams.get('search_path')!
      const role = `plantstore_test_app_${randomBytes(4).toString('hex')}`
      const admin = postgres(POSTGRES_URL!, { max: 1, onnotice: () => {} })
      try {
        await (await openStorage(database.url)).close()
        await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'pw'`)
        await admin.unsafe(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`)
        await admin.unsafe(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role}`)
        const url = new URL(database.url)
        url.username = role
        url.password = 'pw'
        for (const migrate of [true, false]) {
          const storage = await openStorage(url.toString(), { migrate })
          try {
            const token = await storage.tokens.create(mintToken({ accountName: `a${migrate}` }).record)
            assert.equal(
              await storage.plants.create(token.accountId, { id: 1n, name: 'x', tag: null }, plantCreated),
              'created',
            )
            assert.equal(await storage.tokens.revoke(token.id), true)
            await storage.health.probeWrite()
          } finally {
            await storage.close()
          }
        }
      } finally {
        await database.dispose()
        await admin.unsafe(`DROP ROLE IF EXISTS ${role}`)
        await admin.end()
      }
    })
  })
