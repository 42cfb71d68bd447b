import path from 'node:path'
import { redactUrl } from '../src/redact.js'
import { createBenchSchema } from './postgres.js'
import type { ServerContext } from './servers.js'

export const BACKENDS = ['SQLite', 'PostgreSQL'] as const
export type Backend = (typeof BACKENDS)[number]

/**
 * An empty database for one server of the run: a SQLite file in the temp folder, or a PostgreSQL schema of its own
 * (dropped by cleanup). `name` tells the run's databases apart: letters, digits and '_' only, as it names the
 * schema too.
 */
export async function freshDatabase(
  backend: Backend,
  name: string,
  context: ServerContext,
  postgresUrl: string | undefined,
): Promise<string> {
  if (backend === 'SQLite') return `sqlite:${path.join(context.tmpDir, `${name}.db`)}`
  if (postgresUrl === undefined) throw new Error('PostgreSQL: no server URL (PLANTSTORE_BENCH_POSTGRES_URL)')
  const schema = await createBenchSchema(postgresUrl, name)
  context.cleanup.add(`drop schema ${schema.name}`, schema.drop)
  process.stdout.write(`PostgreSQL: schema ${schema.name} at ${redactUrl(postgresUrl)}\n`)
  return schema.databaseUrl
}
