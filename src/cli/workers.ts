import cluster, { type Worker } from 'node:cluster'
import type { Config } from '../config.js'
import { openConfiguredStorage } from '../configured-storage.js'

// A worker dying this soon after the last replacement counts towards giving up.
const CRASH_WINDOW_MS = 60_000
const MAX_CRASHES = 5

/**
 * The primary of `serve --workers N`: migrates (or checks the schema) once, forks N workers that share the
 * listening port (each a full server, see serve()), and on SIGTERM/SIGINT passes the signal on, exiting 0 once
 * every worker has shut down cleanly. A worker that fails before listening (port in use, database down) stops
 * the whole start with exit 1; one that dies later is replaced, unless workers keep dying.
 */
export async function runPrimary(config: Config): Promise<void> {
  await (await openConfiguredStorage(config)).close()
  const live = new Set<Worker>()
  const listening = new WeakSet<Worker>()
  const crashes: number[] = []
  let stopping = false
  let failed = false

  const fork = () => live.add(cluster.fork({ DATABASE_MIGRATE_ON_START: 'false' }))
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    for (const worker of live) worker.process.kill(signal)
    if (live.size === 0) process.exit(failed ? 1 : 0)
  }
  /** Whether a dead worker is better replaced than taken as a reason to stop everything. */
  const replaceable = (worker: Worker): boolean => {
    const now = Date.now()
    crashes.push(now)
    while (crashes[0] !== undefined && crashes[0] < now - CRASH_WINDOW_MS) crashes.shift()
    return listening.has(worker) && crashes.length <= MAX_CRASHES
  }
  cluster.on('listening', (worker) => listening.add(worker))
  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker)
    if (code !== 0 || signal !== null) failed = failed || stopping
    if (stopping) {
      if (live.size === 0) process.exit(failed ? 1 : 0)
      return
    }
    const replace = replaceable(worker)
    process.stderr.write(
      `plantstore: worker ${worker.process.pid} exited (${signal ?? code}); ${replace ? 'starting another' : 'stopping'}\n`,
    )
    if (replace) return void fork()
    failed = true
    stop('SIGTERM')
  })
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  for (let i = 0; i < config.WORKERS; i++) fork()
}
