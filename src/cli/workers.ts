import cluster, { type Worker } from 'node:cluster'
import type { Config } from '../config.js'
import { openConfiguredStorage } from '../server.js'

/**
 * The primary of `serve --workers N`: migrates once, forks N workers that share the listening port (each a
 * full server, see serve()), replaces a worker that dies, and on SIGTERM/SIGINT passes the signal on and
 * exits 0 once every worker has shut down gracefully.
 */
export async function runPrimary(config: Config): Promise<void> {
  if (config.DATABASE_MIGRATE_ON_START) await (await openConfiguredStorage(config)).close()
  let stopping = false
  const fork = (): Worker => cluster.fork()
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0)
      return
    }
    process.stderr.write(`plantstore: worker ${worker.process.pid} exited (${signal ?? code}); starting another\n`)
    fork()
  })
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal)
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  for (let i = 0; i < config.WORKERS; i++) fork()
}
