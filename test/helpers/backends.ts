import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { openStorage, type InstrumentedStorage, type OpenOptions } from '../../src/storage/index.js'

/** A database a test can open storage on, and throw away afterwards. */
export interface TestDatabase {
  url: string
  dispose(): Promise<void>
}

/** A storage backend the shared suites run against. */
export interface TestBackend {
  name: string
  createDatabase(): Promise<TestDatabase>
}

const sqlite: TestBackend = {
  name: 'sqlite',
  async createDatabase() {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-test-'))
    return {
      url: `sqlite:${join(dir, 'store.db')}`,
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    }
  },
}

/** The PostgreSQL server the suites may use; without it they run on SQLite alone. */
export const POSTGRES_URL = process.env.PLANTSTORE_TEST_POSTGRES_URL || undefined

/** Runs `fn` on a one-connection admin client, always closing it. */
async function withAdmin<T>(url: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    return await fn(sql)
  } finally {
    await sql.end({ timeout: 5 })
  }
}

/** `url` with its search_path set, so every connection of the store lands in `schema`. */
function inSchema(url: string, schema: string): string {
  const parsed = new URL(url)
  parsed.searchParams.set('search_path', schema)
  return parsed.toString()
}

/** A fresh schema per database, so concurrent runs and tests never see each other's rows. */
export function postgresBackend(url: string): TestBackend {
  return {
    name: 'postgres',
    async createDatabase() {
      const schema = `plantstore_test_${process.pid}_${randomBytes(4).toString('hex')}`
      await withAdmin(url, (sql) => sql`CREATE SCHEMA ${sql(schema)}`)
      return {
        url: inSchema(url, schema),
        dispose: () => withAdmin(url, (sql) => sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`).then(() => {}),
      }
    },
  }
}

/** Every backend available on this machine; suites loop over it. */
export const backends: TestBackend[] = POSTGRES_URL === undefined ? [sqlite] : [sqlite, postgresBackend(POSTGRES_URL)]

/** Opens storage on a fresh database of the backend (with `options`: quotas, say); dispose() closes and removes it. */
export async function freshStorage(
  backend: TestBackend,
  options: OpenOptions = { migrate: true },
): Promise<{ storage: InstrumentedStorage; url: string; dispose(): Promise<void> }> {
  const database = await backend.createDatabase()
  const storage = await openStorage(database.url, options)
  return {
    storage,
    url: database.url,
    dispose: async () => {
      await storage.close()
      await database.dispose()
    },
  }
}
