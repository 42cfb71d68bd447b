import { parseArgs } from 'node:util'
import { ConfigError, DEFAULT_DATABASE_URL } from '../config.js'
import { openConfiguredTransfer } from '../configured-storage.js'
import { redactUrl } from '../redact.js'
import { StoreNotEmptyError, type StoreEntry } from '../storage/index.js'
import { printNote } from './common.js'
import { EntryReader, lines } from './import-lines.js'
import { Progress } from './progress.js'
import { commandConfig } from './settings.js'
import { countsText } from './transfer-counts.js'

export const IMPORT_HELP = `Usage: plantstore import [--database URL] < store.ndjson

Reads an export (plantstore export) on stdin into the store --database names, from
either backend to either: SQLite to PostgreSQL, PostgreSQL to SQLite. Migrates the
store first, as plantstore migrate does, and refuses one that already holds accounts,
tokens or plants. Checks every line and stops at the first bad one, naming it; nothing
is written unless everything is. See docs/export-format.md.

--database defaults to DATABASE_URL, then ${DEFAULT_DATABASE_URL}.`

/** The entries as they pass, with a progress line on a terminal. */
async function* shown(entries: AsyncIterable<StoreEntry>, reader: EntryReader, progress: Progress) {
  for await (const entry of entries) {
    yield entry
    progress.tick(() => `importing: line ${reader.lineNumber.toLocaleString('en-US')}`)
  }
}

/** `plantstore import`. */
export async function importCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { database: { type: 'string' } } })
  if (process.stdin.isTTY) throw new ConfigError('stdin: give the export on stdin: plantstore import < store.ndjson')
  const config = commandConfig({ DATABASE_URL: values.database })
  const transfer = await openConfiguredTransfer(config, true)
  const reader = new EntryReader({ allowPrivate: config.PLANTSTORE_WEBHOOK_ALLOW_PRIVATE })
  const progress = new Progress()
  try {
    const counts = await transfer.write(shown(reader.entries(lines(process.stdin)), reader, progress))
    progress.done()
    printNote(`plantstore: imported ${countsText(counts)} into ${redactUrl(config.DATABASE_URL)}`)
  } catch (err) {
    progress.done()
    if (err instanceof StoreNotEmptyError) {
      throw new ConfigError(`${redactUrl(config.DATABASE_URL)}: ${err.message}; nothing was imported`)
    }
    throw err
  } finally {
    await transfer.close()
    // Whatever is left unread on stdin is not waited for.
    process.stdin.destroy()
  }
}
