import { parseArgs } from 'node:util'
import { DEFAULT_DATABASE_URL } from '../config.js'
import { redactUrl } from '../redact.js'
import { openConfiguredStorage } from '../configured-storage.js'
import { commandConfig } from './settings.js'

export const MIGRATE_HELP = `Usage: plantstore migrate [--database URL]

Applies the database migrations this release needs, then exits; safe to run while servers
are running and from several places at once (PostgreSQL serialises them with an advisory lock).
Run it before starting servers with DATABASE_MIGRATE_ON_START=false.

--database defaults to DATABASE_URL, then ${DEFAULT_DATABASE_URL}.`

/** `plantstore migrate`. */
export async function migrateCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { database: { type: 'string' } }, strict: true })
  const config = commandConfig({ DATABASE_URL: values.database })
  const storage = await openConfiguredStorage(config, true)
  await storage.close()
  const where = redactUrl(config.DATABASE_URL)
  const applied = storage.migrationsApplied
  process.stdout.write(
    applied.length === 0
      ? `plantstore: ${where} is up to date\n`
      : `plantstore: applied migration(s) ${applied.join(', ')} to ${where}\n`,
  )
}
