import path from 'node:path'
import Database from 'better-sqlite3'
import postgres from 'postgres'
import { redactUrl } from '../src/redact.js'
import type { ServerContext } from './servers.js'

export const BACKENDS = ['SQLite', 'PostgreSQL'] as const
export type Backend = (typeof BACKENDS)[number]

/** Runs `use` on a connection of its own to a postgres:// URL, closed afterwards. */
export async function withPostgres<T>(url: string, use: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    return await use(sql)
  } finally {
    await sql.end()
  }
}

/** Runs `use` on a sqlite:FILE URL's database, opened for it alone. */
export function withSqlite<T>(url: string, use: (db: Database.Database) => T): T {
  const db = new Database(url.slice('sqlite:'.length), { timeout: 10_000 })
  try {
    return use(db)
  } finally {
    db.close()
  }
}

/** The rows of a query ($1, $2… parameters) on either backend. */
export async function queryRows<T>(databaseUrl: string, query: string, params: string[] = []): Promise<T[]> {
  if (databaseUrl.startsWith('sqlite:'))
    return withSqlite(databaseUrl, (db) => db.prepare(query.replace(/\$\d+/g, '?')).all(...params) as T[])
  return withPostgres(databaseUrl, async (sql) => [...(await sql.unsafe(query, params))] as T[])
}

/**
 * An empty database for one server of the run: a SQLite file in the temp folder, or a PostgreSQL schema of its own
 * (`plantstore_bench_PID_NAME`, dropped by cleanup). `name` holds letters, digits and '_' only.
 */
export async function freshDatabase(backend: Backend, name: string, context: ServerContext, postgresUrl?: string) {
  if (backend === 'SQLite') return `sqlite:${path.join(context.tmpDir, `${name}.db`)}`
  if (postgresUrl === undefined) throw new Error('PostgreSQL: no server URL (PLANTSTORE_BENCH_POSTGRES_URL)')
  const schema = `plantstore_bench_${process.pid}_${name}`
  const drop = () => withPostgres(postgresUrl, (sql) => sql`drop schema if exists ${sql(schema)} cascade`)
  await drop()
  await withPostgres(postgresUrl, (sql) => sql`create schema ${sql(schema)}`)
  context.cleanup.add(`drop schema ${schema}`, drop)
  process.stdout.write(`PostgreSQL: schema ${schema} at ${redactUrl(postgresUrl)}\n`)
  const url = new URL(postgresUrl)
  url.searchParams.set('search_path', schema)
  return url.toString()
}
