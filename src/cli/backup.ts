import { parseArgs } from 'node:util'
import { ConfigError, DEFAULT_DATABASE_URL } from '../config.js'
import { redactUrl } from '../redact.js'
import {
  BackupFailedError,
  BackupTargetExistsError,
  BackupUnsupportedError,
  backupStore,
  type BackupSummary,
} from '../storage/index.js'
import { backupProgressText, megabytes } from './backup-progress.js'
import { Progress } from './progress.js'
import { counted } from './transfer-counts.js'
import { commandConfig } from './settings.js'
import { printNote } from './common.js'
import { visible } from './visible.js'

export const BACKUP_HELP = `Usage: plantstore backup PATH [--database URL] [--force]

Writes a consistent copy of the SQLite store to the file PATH while servers keep serving it:
SQLite's VACUUM INTO reads one snapshot in one read transaction, and writers go on meanwhile.
The copy holds every write committed before the command started. It is written to a temporary
file beside PATH, passes PRAGMA integrity_check, is fsynced and then renamed to PATH; a backup
that fails or is interrupted leaves neither (one killed outright leaves its temporary files, which
the next backup to PATH removes). The file is readable by its owner only (it holds
token hashes and webhook signing secrets) and serves as it is: plantstore serve --database sqlite:PATH.

  --force     replace a file already at PATH (without it: exit 1, the file untouched)
  --database  the store; defaults to DATABASE_URL, then ${DEFAULT_DATABASE_URL}

Progress is shown on stderr when it is a terminal. Done, it prints one line on stdout:
  plantstore: backed up STORE to PATH: P plants, A accounts, T tokens, S subscriptions, B bytes (M MB)
PostgreSQL stores are refused: back them up with pg_dump or base backups (docs/operations.md#backups).`

// Digits alone, as the line has always had them: scripts read it.
const digits = (n: number) => String(n)

function summaryLine(url: string, target: string, summary: BackupSummary): string {
  const counts = [
    counted(summary.plants, 'plant', digits),
    counted(summary.accounts, 'account', digits),
    counted(summary.tokens, 'token', digits),
    counted(summary.subscriptions, 'subscription', digits),
    counted(summary.bytes, 'byte', digits),
  ]
  return `plantstore: backed up ${redactUrl(url)} to ${target}: ${counts.join(', ')} (${megabytes(summary.bytes)})`
}

/** The one line each refusal or failure gets (main prints ConfigError messages alone). */
function refusal(err: unknown, target: string): unknown {
  if (err instanceof BackupTargetExistsError)
    return new ConfigError(`PATH: ${target} exists; add --force to replace it`)
  if (err instanceof BackupUnsupportedError) return new ConfigError(`DATABASE_URL: ${err.message}`)
  if (err instanceof BackupFailedError) return new ConfigError(`backup: ${err.message}; nothing was written`)
  return err
}

/** Until the backup ends, SIGINT and SIGTERM abort it (its temporary file goes) instead of killing the process. */
function interruptible(): { signal: AbortSignal; release(): void } {
  const controller = new AbortController()
  const abort = (signal: NodeJS.Signals) => controller.abort(signal)
  process.on('SIGINT', abort)
  process.on('SIGTERM', abort)
  return {
    signal: controller.signal,
    release() {
      process.off('SIGINT', abort)
      process.off('SIGTERM', abort)
    },
  }
}

/** `plantstore backup PATH`. */
export async function backupCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { database: { type: 'string' }, force: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  })
  const target = positionals[0]
  if (target === undefined || target === '' || positionals.length > 1)
    throw new ConfigError('PATH: give exactly one file to write the backup to')
  const url = commandConfig({ DATABASE_URL: values.database }).DATABASE_URL
  // The copying thread reports seldom enough, and its last word (the check) must show: no throttle.
  const progress = new Progress(0)
  const interruption = interruptible()
  let summary: BackupSummary
  try {
    summary = await backupStore(url, target, {
      force: values.force,
      onProgress: (step) => progress.tick(() => backupProgressText(step)),
      signal: interruption.signal,
    })
  } catch (err) {
    progress.done()
    const signal = interruption.signal.reason as NodeJS.Signals | undefined
    interruption.release()
    if (signal === undefined) throw refusal(err, target)
    // The copying thread may be inside SQLite, where nothing stops it: the process ends by the signal it was sent,
    // as it would have without the backup's handler, once the temporary file is gone.
    printNote(`plantstore: backup interrupted by ${signal}; nothing was written`)
    process.kill(process.pid, signal)
    return
  }
  interruption.release()
  progress.done()
  if (summary.staleRemoved.length > 0) {
    const files = counted(summary.staleRemoved.length, 'temporary file')
    printNote(`plantstore: removed ${files} an earlier backup left when killed: ${summary.staleRemoved.join(' ')}`)
  }
  process.stdout.write(visible(summaryLine(url, target, summary)) + '\n')
}
