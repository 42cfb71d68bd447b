import { InstrumentedStorage } from './instrumented.js'
import {
  UnsupportedDatabaseUrlError,
  type BackupOptions,
  type BackupSummary,
  type OpenOptions,
  type StoreTransfer,
} from './types.js'

export { InstrumentedStorage, type StorageTimer } from './instrumented.js'
// The one door to storage from the rest of src/: every type, error and constant of its contract (types.ts).
export * from './types.js'

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

/**
 * Writes a consistent copy of the store a DATABASE_URL names to the file `target`, without stopping its servers: see
 * sqlite/backup.ts. PostgreSQL refuses (BackupUnsupportedError), naming its own tools.
 */
export async function backupStore(url: string, target: string, options: BackupOptions): Promise<BackupSummary> {
  const file = sqliteFile(url)
  if (file !== undefined && file !== '') return (await import('./sqlite/backup.js')).backup(file, target, options)
  if (isPostgresUrl(url)) return (await import('./postgres/backup.js')).backup()
  throw new UnsupportedDatabaseUrlError(url)
}

/**
 * Opens the store a DATABASE_URL names for export or import (StoreTransfer) on a connection of its own, migrating
 * it (or checking it is current) as `options` say. Only that backend's module loads.
 */
export async function openTransfer(url: string, options: Pick<OpenOptions, 'migrate'>): Promise<StoreTransfer> {
  const file = sqliteFile(url)
  if (file !== undefined && file !== '') return (await import('./sqlite/transfer.js')).openTransfer(file, options)
  if (isPostgresUrl(url)) return (await import('./postgres/transfer.js')).openTransfer(url, options)
  throw new UnsupportedDatabaseUrlError(url)
}
