import {
  closeSync,
  existsSync,
  fstatSync,
  fsyncSync,
  linkSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  type Stats,
} from 'node:fs'
import { dirname, extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import {
  BackupFailedError,
  BackupTargetExistsError,
  type BackupOptions,
  type BackupProgress,
  type BackupSummary,
} from '../types.js'
import type { CopyCounts, CopyMessage, CopyRequest } from './backup-copy.js'
import { createTemp, removeStaleTemps } from './backup-temp.js'
import { BUSY_TIMEOUT_MS } from './database.js'

/** How often the growing copy is measured for progress. */
const PROGRESS_MS = 100

function statOf(path: string): Stats | undefined {
  try {
    return statSync(path)
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return undefined
    throw err
  }
}

/** Throws unless `target` may be written: not a folder, not the store itself, not taken (unless `force`). */
function checkTarget(file: string, target: string, force: boolean): void {
  const existing = statOf(target)
  if (existing === undefined) return
  if (existing.isDirectory()) throw new BackupFailedError(`${target} is a folder; give a file name`)
  const store = statSync(file)
  if (existing.dev === store.dev && existing.ino === store.ino)
    throw new BackupFailedError(`${target} is the store itself`)
  if (!force) throw new BackupTargetExistsError(target)
}

/**
 * The thread that copies (backup-copy.ts). Run from the TypeScript sources (tsx: the tests), a worker does not
 * inherit tsx's loader, so it loads the module through tsx's API; built, it is plain JavaScript.
 */
function startCopy(request: CopyRequest): Worker {
  const module = new URL(`./backup-copy${extname(fileURLToPath(import.meta.url))}`, import.meta.url)
  if (!module.pathname.endsWith('.ts')) return new Worker(module, { workerData: request })
  const source = `import('tsx/esm/api').then(({ tsImport }) => tsImport(${JSON.stringify(module.href)}, 'file:///'))`
  return new Worker(source, { eval: true, workerData: request })
}

/** Runs the copy into `temp` on its own thread, reporting progress as the file grows; resolves with its counts. */
function copy(file: string, temp: string, options: BackupOptions): Promise<CopyCounts> {
  const worker = startCopy({ source: file, temp, busyTimeoutMs: BUSY_TIMEOUT_MS })
  const progress: BackupProgress = { phase: 'copying', copied: 0, total: 0 }
  const fd = openSync(temp, 'r')
  let open = true
  return new Promise<CopyCounts>((resolve, reject) => {
    const finish = (settle: () => void) => {
      clearInterval(timer)
      // Ends the thread once it is out of SQLite; done or failed, it has nothing left to do.
      void worker.terminate()
      if (open) closeSync(fd)
      open = false
      options.signal?.removeEventListener('abort', abort)
      settle()
    }
    const report = () => {
      if (!open) return
      // Not flushed as it grows: fdatasync every few MB cost the servers' commits more than the final fsync
      // (bench/README.md, "Backups under write load").
      if (progress.phase === 'copying') progress.copied = fstatSync(fd).size
      if (progress.total > 0 || progress.phase === 'checking') options.onProgress?.({ ...progress })
    }
    const timer = setInterval(report, PROGRESS_MS)
    // A thread inside a SQLite call cannot be stopped; its file goes with the caller's cleanup, and the thread
    // with the process (the CLI ends it by the signal).
    const abort = () => finish(() => reject(options.signal!.reason))
    options.signal?.addEventListener('abort', abort, { once: true })
    worker.on('message', (message: CopyMessage) => {
      if (message.kind === 'total') {
        progress.total = message.bytes
        report()
      } else if (message.kind === 'checking') {
        progress.phase = 'checking'
        if (open) progress.copied = progress.total = fstatSync(fd).size
        report()
      } else if (message.kind === 'done') finish(() => resolve(message.counts))
      else finish(() => reject(new BackupFailedError(message.message)))
    })
    worker.on('error', (err) => finish(() => reject(new BackupFailedError(err.message, { cause: err }))))
    worker.on('exit', (code) => finish(() => reject(new BackupFailedError(`the copying thread exited (${code})`))))
  })
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Gives the finished copy its name. Without `force`, by a hard link, which fails if the name was taken meanwhile
 * (a rename would replace it); on a file system without hard links, by a rename after checking the name is free.
 */
function place(temp: string, target: string, force: boolean): void {
  if (force) return renameSync(temp, target)
  try {
    linkSync(temp, target)
  } catch (err) {
    const code = (err as { code?: unknown }).code
    if (code === 'EEXIST') throw new BackupTargetExistsError(target)
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw err
    if (existsSync(target)) throw new BackupTargetExistsError(target)
    return renameSync(temp, target)
  }
  unlinkSync(temp)
}

/**
 * Writes a consistent copy of the SQLite store `file` to `target` while servers keep reading and writing it: into a
 * temporary file beside `target`, checked (PRAGMA integrity_check) and counted, fsynced, renamed, then the folder
 * fsynced. Whatever fails, or an abort, leaves neither the temporary file nor a half `target`.
 */
export async function backup(file: string, target: string, options: BackupOptions): Promise<BackupSummary> {
  if (file === ':memory:') throw new BackupFailedError('an in-memory store holds nothing to back up')
  if (!existsSync(file)) throw new BackupFailedError(`no SQLite store at ${file}`)
  checkTarget(file, target, options.force)
  const staleRemoved = removeStaleTemps(target)
  const temp = createTemp(target)
  try {
    const counts = await copy(file, temp, options)
    const fd = openSync(temp, 'r')
    let bytes: number
    try {
      fsyncSync(fd)
      bytes = fstatSync(fd).size
    } finally {
      closeSync(fd)
    }
    place(temp, target, options.force)
    fsyncPath(dirname(target))
    return { ...counts, bytes, staleRemoved }
  } catch (err) {
    rmSync(temp, { force: true })
    throw err
  }
}
