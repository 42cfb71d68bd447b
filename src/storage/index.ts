import { redactUrl } from '../redact.js'
import type { OpenOptions, Storage } from './types.js'

export type { OpenOptions, Storage } from './types.js'
export { MigrationsPendingError } from './types.js'

/** Where `sqlite:` URLs point: `sqlite:/abs/file.db`, `sqlite:relative/file.db` or `sqlite::memory:`. */
export function sqliteFile(url: string): string | undefined {
  return url.startsWith('sqlite:') ? url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '') : undefined
}

/** True for the URL schemes PostgreSQL clients accept. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url)
}

/**
 * Opens the storage a DATABASE_URL names, migrating it (or checking it is current) as `options` say. Each
 * backend's module (and database client) loads only when used: a process holds one backend's memory, not both.
 */
export async function openStorage(url: string, options: OpenOptions = { migrate: true }): Promise<Storage> {
  const file = sqliteFile(url)
  if (file !== undefined && file !== '') {
    const { SqliteStorage } = await import('./sqlite/index.js')
    return new SqliteStorage(file, { migrate: options.migrate, limits: options.limits })
  }
  if (isPostgresUrl(url)) {
    const { PostgresStorage } = await import('./postgres/index.js')
    return PostgresStorage.open(url, options)
  }
  throw new Error(
    `DATABASE_URL: unsupported database URL "${redactUrl(url)}" (expected sqlite:<path> or postgres://...)`,
  )
}
