import { ConfigError, storageLimits, type Config } from './config.js'
import { wrongNodeMessage } from './native-addon.js'
import { redactUrl } from './redact.js'
import {
  MigrationsPendingError,
  openStorage,
  openTransfer,
  StorageUnavailableError,
  UnsupportedDatabaseUrlError,
  type InstrumentedStorage,
  type StoreTransfer,
} from './storage/index.js'

/** Why opening storage failed, as one line naming the key to look at. */
function openError(err: unknown, config: Pick<Config, 'DATABASE_URL'>): ConfigError {
  if (err instanceof MigrationsPendingError)
    return new ConfigError(`DATABASE_MIGRATE_ON_START: is false and ${err.message}`)
  if (err instanceof UnsupportedDatabaseUrlError)
    return new ConfigError(
      `DATABASE_URL: unsupported database URL "${redactUrl(err.url)}" (expected sqlite:<path> or postgres://...)`,
    )
  const cause = err instanceof StorageUnavailableError ? err.cause : err
  // Not a database problem: the SQLite driver was built for another Node.js.
  const wrongNode = wrongNodeMessage(cause)
  if (wrongNode !== undefined) return new ConfigError(wrongNode)
  const reason = cause instanceof Error ? cause.message : String(cause)
  return new ConfigError(`DATABASE_URL: cannot open ${redactUrl(config.DATABASE_URL)}: ${reason}`)
}

/** Opens the configured storage, migrating unless told not to, or fails with one line naming the key. */
export async function openConfiguredStorage(
  config: Config,
  migrate = config.DATABASE_MIGRATE_ON_START,
): Promise<InstrumentedStorage> {
  try {
    const limits = storageLimits(config)
    return await openStorage(config.DATABASE_URL, { migrate, poolSize: config.DATABASE_POOL_SIZE, limits })
  } catch (err) {
    throw openError(err, config)
  }
}

/** Opens the configured store for export or import, migrating unless told not to, or fails with one line. */
export async function openConfiguredTransfer(
  config: Config,
  migrate = config.DATABASE_MIGRATE_ON_START,
): Promise<StoreTransfer> {
  try {
    return await openTransfer(config.DATABASE_URL, { migrate })
  } catch (err) {
    throw openError(err, config)
  }
}
