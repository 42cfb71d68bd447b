/**
 * What the headers of issue 30 cost: per backend one service with CORS on, seeded like the others' listed account, as
 * the targets of two pair scenarios, each request with and without its header on that same server: `cors-get` (a
 * GET with an allowed Origin) and `idempotency-post` (a POST with an Idempotency-Key of its own).
 */
import { bulkSeed } from './bulk-seed.js'
import { freshDatabase, type Backend } from './databases.js'
import { newTarget, type Pair, type Target } from './rounds.js'
import { ACCOUNT_NAMES, type BenchSizes } from './scenarios.js'
import { startService, type Runtime, type ServerContext } from './servers.js'

const ORIGIN = 'https://app.example.com'

/** Starts the services; each scenario's targets (without, with, per backend) and pairs. */
export async function startHeaderCosts(
  backends: Backend[],
  sizes: BenchSizes,
  postgresUrl: string | undefined,
  context: ServerContext,
  runtime: Runtime | undefined,
) {
  const targets = { cors: [] as Target[], idempotency: [] as Target[] }
  const pairs: Pair[] = []
  for (const backend of backends) {
    const databaseUrl = await freshDatabase(backend, 'headers', context, postgresUrl)
    const [seeded] = await bulkSeed(databaseUrl, [{ name: ACCOUNT_NAMES.list, plants: sizes.list }])
    const token = seeded?.token ?? ''
    const env = { PLANTSTORE_CORS_ORIGINS: ORIGIN }
    const server = await startService(`${backend} headers`, databaseUrl, token, context, { env, runtime })
    const view = (label: string, header: Record<string, string> = {}): Target => ({
      ...newTarget({ ...server, label: `${backend} ${label}` }, { list: token }, databaseUrl),
      env: header,
    })
    targets.cors.push(view('without Origin'), view('with Origin', { PLANTSTORE_BENCH_ORIGIN: ORIGIN }))
    targets.idempotency.push(view('without key'), view('with key', { PLANTSTORE_BENCH_KEYED: '1' }))
    pairs.push(
      { name: `${backend} Origin`, without: `${backend} without Origin`, with: `${backend} with Origin` },
      { name: `${backend} Idempotency-Key`, without: `${backend} without key`, with: `${backend} with key` },
    )
  }
  return { targets, pairs }
}
