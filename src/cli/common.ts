import { ConfigError } from '../config.js'
import { openConfiguredStorage } from '../configured-storage.js'
import type { Storage } from '../storage/index.js'
import { commandConfig } from './settings.js'
import { visible } from './visible.js'

const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

/** The --account value, or the usage error naming it. */
export function accountName(value: string | undefined): string {
  if (value === undefined || !ACCOUNT_NAME.test(value)) {
    throw new ConfigError(
      '--account: required, 1 to 64 characters from A-Z a-z 0-9 . _ - (starting with a letter or digit)',
    )
  }
  return value
}

/** Runs `fn` on the storage --database (or DATABASE_URL) names, closing it afterwards. */
export async function withStorage(
  database: string | undefined,
  fn: (storage: Storage) => Promise<void>,
): Promise<void> {
  const storage = await openConfiguredStorage(commandConfig({ DATABASE_URL: database }))
  await fn(storage).finally(() => storage.close())
}

let readerWatched = false
/**
 * A listing piped into a reader that stops early (`| head`) ends quietly, as ls or grep do, instead of with Node's
 * unhandled EPIPE and its stack: what was wanted has been read. Another failure of stdout gets one line and exit 1.
 */
export function endQuietlyWhenReaderGone(): void {
  if (readerWatched) return
  readerWatched = true
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0)
    process.stderr.write(`plantstore: stdout: ${visible(err.message)}\n`)
    process.exit(1)
  })
}

/** Prints `rows` under `header` in aligned columns on stdout, every cell escaped (see visible). */
export function printTable(header: string[], rows: string[][]): void {
  endQuietlyWhenReaderGone()
  const cells = [header, ...rows].map((row) => row.map(visible))
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)))
  for (const row of cells) {
    process.stdout.write(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd() + '\n',
    )
  }
}

/** Prints one line on stderr, escaped (see visible): the lines that tell an operator what was done. */
export function printNote(text: string): void {
  process.stderr.write(visible(text) + '\n')
}
