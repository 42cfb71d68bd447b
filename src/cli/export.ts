import { once } from 'node:events'
import { randomBytes } from 'node:crypto'
import { createWriteStream, existsSync, linkSync, openSync, rmSync, type WriteStream } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import type { Writable } from 'node:stream'
import { parseArgs } from 'node:util'
import { ConfigError, DEFAULT_DATABASE_URL, type Config } from '../config.js'
import { openConfiguredTransfer } from '../configured-storage.js'
import type { EntryCounts } from '../storage/index.js'
import { accountName, printNote } from './common.js'
import { endLine, entryLine, headerLine } from './export-lines.js'
import { Progress } from './progress.js'
import { commandConfig } from './settings.js'
import { countsText } from './transfer-counts.js'

export const EXPORT_HELP = `Usage: plantstore export [--account NAME] [--output FILE] [--database URL]

Writes the store (or one account) as NDJSON on stdout, or into FILE: a header line, then
accounts, tokens (the hashes of their secrets, never a secret), plants and webhook
subscriptions, then an end line with their counts (import refuses an export without it).
Read it back with plantstore import, on either backend.
The export holds the subscriptions' signing secrets: keep it as you keep the store.
FILE is created with mode 0600, only once the export is whole, and never overwritten. Queued and failed webhook
deliveries, attempts and rate counters are not exported. See docs/export-format.md.

--database defaults to DATABASE_URL, then ${DEFAULT_DATABASE_URL}.`

/** Lines gathered before one write: fewer, larger writes. */
const CHUNK = 256 * 1024

/** Why FILE cannot be written, as the one line to print. */
function refusal(file: string, err: unknown): ConfigError {
  const code = (err as { code?: unknown }).code
  if (code === 'EEXIST') return new ConfigError(`--output: ${file} exists; export never overwrites a file`)
  return new ConfigError(`--output: cannot create ${file}: ${(err as Error).message}`)
}

/**
 * The file an export to FILE is written into: beside FILE (same file system, so it can be linked into place), mode
 * 0600, created exclusively, removed unless `keep` links it to FILE; SIGINT and SIGTERM remove it too.
 */
class PartialFile {
  readonly path: string
  readonly stream: WriteStream
  readonly #onSignal = (signal: NodeJS.Signals) => {
    this.discard()
    // Ends the way the signal would have ended it without this handler.
    process.kill(process.pid, signal)
  }

  constructor(readonly file: string) {
    // Said before the export starts, not after: FILE is linked without replacing it in any case.
    if (existsSync(file)) throw refusal(file, { code: 'EEXIST' })
    this.path = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString('hex')}.partial`)
    try {
      this.stream = createWriteStream(this.path, { fd: openSync(this.path, 'wx', 0o600) })
    } catch (err) {
      throw refusal(file, err)
    }
    process.on('SIGINT', this.#onSignal)
    process.on('SIGTERM', this.#onSignal)
  }

  /** Puts the whole export in place as FILE; never replaces a FILE made meanwhile. */
  async keep(): Promise<void> {
    this.stream.end()
    await once(this.stream, 'finish')
    try {
      linkSync(this.path, this.file)
    } catch (err) {
      throw refusal(this.file, err)
    } finally {
      this.discard()
    }
  }

  discard(): void {
    process.off('SIGINT', this.#onSignal)
    process.off('SIGTERM', this.#onSignal)
    this.stream.destroy()
    rmSync(this.path, { force: true })
  }
}

/** Writes `text`, waiting while `out` is behind. */
async function put(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await once(out, 'drain')
}

async function exportTo(out: Writable, account: string | undefined, config: Config) {
  const transfer = await openConfiguredTransfer(config)
  const counts: EntryCounts = { accounts: 0, tokens: 0, plants: 0, subscriptions: 0 }
  const progress = new Progress()
  try {
    let chunk = headerLine(account ?? null) + '\n'
    for await (const entry of transfer.read(account)) {
      chunk += entryLine(entry) + '\n'
      counts[`${entry.type}s`]++
      if (chunk.length >= CHUNK) {
        await put(out, chunk)
        chunk = ''
        progress.tick(() => `exporting: ${countsText(counts)}`)
      }
    }
    await put(out, chunk + endLine(counts) + '\n')
  } finally {
    progress.done()
    await transfer.close()
  }
  return counts
}

/** stdout failed: most often its reader (an import that refused a line, `head`) exited; the export is of no use. */
function readerGone(err: NodeJS.ErrnoException): never {
  const why = err.code === 'EPIPE' ? 'the reader of the export went away (EPIPE)' : `stdout: ${err.message}`
  process.stderr.write(`plantstore: ${why}\n`)
  process.exit(1)
}

/** `plantstore export`. */
export async function exportCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, output: { type: 'string' }, database: { type: 'string' } },
  })
  const account = values.account === undefined ? undefined : accountName(values.account)
  // Before anything is written: settings that stop the command leave no file and no note.
  const config = commandConfig({ DATABASE_URL: values.database })
  const file = values.output
  const partial = file === undefined ? undefined : new PartialFile(file)
  if (partial === undefined) process.stdout.on('error', readerGone)
  printNote('plantstore: the export holds the signing secrets of webhook subscriptions: keep it as secret as the store')
  try {
    const counts = await exportTo(partial?.stream ?? process.stdout, account, config)
    if (account !== undefined && counts.accounts === 0) throw new ConfigError(`--account: no account ${account}`)
    await partial?.keep()
    printNote(`plantstore: exported ${countsText(counts)}${file === undefined ? '' : ` to ${file}`}`)
  } catch (err) {
    // A partial export is no export: its file goes.
    partial?.discard()
    throw err
  }
}
