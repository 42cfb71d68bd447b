import cluster from 'node:cluster'
import { ConfigError, DEFAULT_DATABASE_URL, loadConfig, type Config, type ConfigKey } from '../config.js'
import { misspeltDatabaseUrl, unknownSettings } from '../unknown-settings.js'
import { visible } from './visible.js'

let warned = false

/**
 * The settings a command runs with: `overrides` (its flags) over the environment over the defaults. A variable that
 * looks meant for the service but is no setting gets a warning line, once, by the primary (a server's workers share
 * its environment), and the command goes on. A misspelt DATABASE_URL with neither DATABASE_URL nor --database
 * stops it instead: the default store would be a new, empty one (with a new first token on a server), not the one
 * meant.
 */
export function commandConfig(overrides: Partial<Record<ConfigKey, string>> = {}): Config {
  const misspelt = overrides.DATABASE_URL === undefined ? misspeltDatabaseUrl(process.env) : undefined
  if (!warned && cluster.isPrimary)
    for (const line of unknownSettings(process.env, misspelt)) process.stderr.write(`plantstore: ${visible(line)}\n`)
  warned = true
  if (misspelt !== undefined) {
    throw new ConfigError(
      `${misspelt}: not a setting, and DATABASE_URL is not set; did you mean DATABASE_URL? ` +
        `(not opening the default ${DEFAULT_DATABASE_URL} instead: set DATABASE_URL, or give --database)`,
    )
  }
  return loadConfig(process.env, overrides)
}
