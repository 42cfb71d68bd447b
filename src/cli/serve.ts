import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.js'
import { serve } from '../server.js'
import { runPrimary } from './workers.js'

/** `plantstore serve`. */
export async function serveCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      database: { type: 'string' },
      workers: { type: 'string' },
    },
    strict: true,
  })
  const config = loadConfig(process.env, {
    PORT: values.port,
    HOST: values.host,
    DATABASE_URL: values.database,
    WORKERS: values.workers,
  })
  if (config.WORKERS > 1 && cluster.isPrimary) await runPrimary(config)
  else await serve(config)
}
