import { redactUrl } from '../redact.js'
import { SqliteStorage } from './sqlite/index.js'
import type { Storage } from './types.js'

export type { Storage } from './types.js'

/** Where `sqlite:` URLs point: `sqlite:/abs/file.db`, `sqlite:relative/file.db` or `sqlite::memory:`. */
export function sqliteFile(url: string): string | undefined {
  return url.startsWith('sqlite:') ? url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '') : undefined
}

/** Opens the storage a DATABASE_URL names. */
export function openStorage(url: string): Storage {
  const file = sqliteFile(url)
  if (file !== undefined && file !== '') return new SqliteStorage(file)
  throw new Error(`DATABASE_URL: unsupported database URL "${redactUrl(url)}" (expected sqlite:<path>)`)
}
