import { InstrumentedStorage } from './instrumented.js'
import { UnsupportedDatabaseUrlError, type OpenOptions } from './types.js'

export { InstrumentedStorage, type StorageTimer } from './instrumented.js'
export type { OpenOptions, PageRequest, PlantStore, Storage, StoredPlant } from './types.js'
export { MigrationsPendingError, UnsupportedDatabaseUrlError } from './types.js'

/** Where `sqlite:` URLs point: `sqlite:/abs/file.db`, `sqlite:relative/file.db` or `sqlite::memory:`. */
export function sqliteFile(url: string): string | undefined {
  return url.startsWith('sqlite:') ? url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '') : undefined
}

/** True for the URL schemes PostgreSQL clients accept. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url)
}

/**
 * Opens the storage a DATABASE_URL names, migrating it (or checking it is current) as `options` say, instrumented
 * (the one view of it every user gets). Each backend's module (and database client) loads only when used: a process
 * holds one backend's memory, not both.
 */
export async function openStorage(url: string, options: OpenOptions = { migrate: true }): Promise<InstrumentedStorage> {
  const file = sqliteFile(url)
  if (file !== undefined && file !== '') {
    const sqlite = await import('./sqlite/index.js')
    return new InstrumentedStorage(await sqlite.open(file, options))
  }
  if (isPostgresUrl(url)) {
    const postgres = await import('./postgres/index.js')
    return new InstrumentedStorage(await postgres.open(url, options))
  }
  throw new UnsupportedDatabaseUrlError(url)
}
