import pino from 'pino'

/** At most this much log output waits in memory for a slow reader of stdout; beyond it, lines are dropped. */
export const LOG_BUFFER_BYTES = 16 * 1024 * 1024
/** A log line reaches stdout at most this long after it was made (or sooner, once 4 KiB are waiting). */
export const LOG_FLUSH_MS = 100
const LOG_BATCH_BYTES = 4096
// A reader of stdout that is gone may never let the last write finish: closing waits no longer than this.
const CLOSE_WAIT_MS = 1000

/** Where the JSON log lines go, and how to write out what waits before the process ends. */
export interface LogDestination {
  stream: pino.DestinationStream
  /** Stops the periodic flush and writes out what is buffered, waiting for it (at most a second). */
  close(): Promise<void>
}

/**
 * stdout for JSON log lines, written asynchronously in batches: a synchronous write per line stalled every request
 * whenever the reader of stdout fell behind (a write to a full pipe sleeps 100 ms and tries again), and a write per
 * line cost more than making it. Closing waits for the last batch, so a process that exits after it leaves no write
 * half done (pino writes what remains at exit too, but without waiting for a write under way: a line could land
 * inside another).
 */
export function stdoutDestination(): LogDestination {
  const stream = pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, maxLength: LOG_BUFFER_BYTES })
  const timer = setInterval(() => stream.flush(), LOG_FLUSH_MS).unref()
  return {
    stream,
    close: () => {
      clearInterval(timer)
      return new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, CLOSE_WAIT_MS).unref()
        stream.flush(() => {
          clearTimeout(giveUp)
          resolve()
        })
      })
    },
  }
}
