import type { BackupProgress } from '../storage/index.js'

/** 54575104 → "54.6 MB". */
export const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`

/** The backup's progress line: bytes copied of the store's size, then the check; undefined before the size is known. */
export function backupProgressText(progress: BackupProgress): string | undefined {
  if (progress.phase === 'checking') return `plantstore: checking the copy (${megabytes(progress.total)})`
  // Nothing to say before the copying thread has read the store's size.
  if (progress.total === 0) return undefined
  // The store's pages in use are an estimate of the copy's size: it stays below 100% until the copy is done.
  const share = Math.min(99, Math.floor((100 * progress.copied) / progress.total))
  return `plantstore: copying ${megabytes(progress.copied)} of about ${megabytes(progress.total)} (${share}%)`
}
