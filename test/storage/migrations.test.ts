import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import postgres from 'postgres'
import { mintToken } from '../../src/auth/issue-token.js'
import { MigrationsPendingError, openStorage } from '../../src/storage/index.js'
import { migrations as postgresMigrations } from '../../src/storage/postgres/migrations.js'
import { migrations as sqliteMigrations } from '../../src/storage/sqlite/migrations.js'
import { backends, POSTGRES_URL, postgresBackend } from '../helpers/backends.js'

const LATEST = sqliteMigrations.map((migration) => migration.version)

test('both backends carry the same migration versions', () => {
  assert.deepEqual(
    postgresMigrations.map((migration) => migration.version),
    LATEST,
  )
})

for (const backend of backends) {
  describe(`migrations and first start (${backend.name})`, () => {
    test('refuses to open an unmigrated database when told not to migrate, naming the pending versions', async () => {
      const database = await backend.createDatabase()
      try {
        await assert.rejects(openStorage(database.url, { migrate: false }), (err: unknown) => {
          assert.ok(err instanceof MigrationsPendingError)
          assert.deepEqual(err.pending, LATEST)
          assert.match(err.message, /plantstore migrate/)
          return true
        })
        const migrated = await openStorage(database.url, { migrate: true })
        assert.deepEqual(migrated.migrationsApplied, LATEST)
        await migrated.close()
        const checked = await openStorage(database.url, { migrate: false })
        assert.deepEqual(checked.migrationsApplied, [])
        await checked.close()
      } finally {
        await database.dispose()
      }
    })

    test('applies migrations exactly once when several instances open an empty database at once', async () => {
      const database = await backend.createDatabase()
      try {
        const stores = await Promise.all(Array.from({ length: 4 }, () => openStorage(database.url)))
        const applied = stores.map((store) => store.migrationsApplied)
        assert.deepEqual(
          applied.filter((versions) => versions.length > 0),
          [LATEST],
        )
        await Promise.all(stores.map((store) => store.close()))
      } finally {
        await database.dispose()
      }
    })

    test('creates the first token exactly once when several instances race on an empty store', async () => {
      const database = await backend.createDatabase()
      try {
        const stores = await Promise.all(Array.from({ length: 4 }, () => openStorage(database.url)))
        const created = await Promise.all(
          stores.flatMap((store) =>
            [1, 2].map(() => store.createFirstToken(mintToken({ accountName: 'default' }).record)),
          ),
        )
        assert.equal(created.filter((token) => token !== undefined).length, 1)
        assert.equal(await stores[0]!.countTokens(), 1)
        assert.equal(await stores[0]!.createFirstToken(mintToken({ accountName: 'x' }).record), undefined)
        await Promise.all(stores.map((store) => store.close()))
      } finally {
        await database.dispose()
      }
    })
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
