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
    db.exec('DELETE FROM schema_migrations WHERE version > 1')
    db.close()
    return
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  await sql.unsafe('DROP TABLE storage_probe, webhook_subscriptions, webhook_deliveries')
  await sql.unsafe('DELETE FROM schema_migrations WHERE version > 1')
  await sql.end()
}

for (const backend of backends) {
  describe(`migrations and first start (${backend.name})`, () => {
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

    test('upgrades a database of the first release, keeping its plants and tokens', () =>
      withDatabase(backend, async (url, open) => {
        const old = await open()
        const token = await old.createToken(mintToken({ accountName: 'a' }).record)
        await old.createPlant(token.accountId, { id: 1n, name: 'x', tag: null })
        await old.close()
        await backToVersion1(url)
        const upgraded = await open()
        assert.deepEqual(upgraded.migrationsApplied, LATEST.slice(1))
        await upgraded.probeWrite()
        assert.deepEqual(await upgraded.listPlants(token.accountId, { limit: 10 }), [{ id: 1n, name: 'x', tag: null }])
        assert.equal(await upgraded.countTokens(), 1)
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
            [1, 2].map(() => store.createFirstToken(mintToken({ accountName: 'default' }).record)),
          ),
        )
        assert.equal(created.filter((token) => token !== undefined).length, 1)
        assert.equal(await stores[0]!.countTokens(), 1)
        assert.equal(await stores[0]!.createFirstToken(mintToken({ accountName: 'x' }).record), undefined)
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
            const token = await storage.createToken(mintToken({ accountName: `a${migrate}` }).record)
            assert.equal(await storage.createPlant(token.accountId, { id: 1n, name: 'x', tag: null }), 'created')
            assert.equal(await storage.revokeToken(token.id), true)
            await storage.probeWrite()
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
