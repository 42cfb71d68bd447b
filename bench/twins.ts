/**
 * The backlog scenarios' services: per backend, twins on databases seeded alike (the listed account, and the noisy
 * account with its plants and webhook subscriptions to the harness's receiver), one also holding the noisy
 * account's queued deliveries. Seeded with the other databases; started only when the backlog scenarios run, since
 * the twin with the backlog delivers all the while it runs, on the servers' core.
 */
import { createServer } from 'node:http'
import { seedBacklog } from './backlog-seed.js'
import { bulkSeed, countPlants } from './bulk-seed.js'
import { settleAll } from './cleanup.js'
import { scrapeDispatcher, scrapeMetrics } from './claims.js'
import { BACKENDS, freshDatabase, type Backend } from './databases.js'
import type { TwinPair } from './report-rows.js'
import { newTarget, type Target } from './rounds.js'
import { ACCOUNT_NAMES, BACKLOG_SUBSCRIPTIONS, count, type BenchSizes } from './scenarios.js'
import { startService, type ServerContext } from './servers.js'

/** A seeded twin database, waiting for its service. */
interface TwinSeed {
  backend: Backend
  backlog: boolean
  databaseUrl: string
  token: string
  queued: number
  line: string
}

export interface SeededTwins {
  seeds: TwinSeed[]
  /** What labels the servers of the harness's Node in a run of several (" on Node 20"), else empty. */
  tag: string
  /** How they were seeded, for the report. */
  lines: string[]
}

/**
 * How long the webhook receiver takes to answer each delivery. A failing receiver would all but stop the dispatcher
 * within a minute (each failure doubles the subscription's backoff), leaving the backlog untouched while measured;
 * one that succeeds slowly keeps every subscription ready, so the dispatcher claims and delivers for the whole run,
 * the account's concurrency (4) at a time. 100 ms is an ordinary answer time for a receiver on the internet.
 */
const RECEIVER_DELAY_MS = 100

/** The noisy account's webhook receiver, in the harness process on loopback; its base URL. Stopped by cleanup. */
async function startReceiver(context: ServerContext): Promise<string> {
  const server = createServer((req, res) => {
    req.resume()
    req.once('end', () => setTimeout(() => res.writeHead(204).end(), RECEIVER_DELAY_MS))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  context.cleanup.add('stop webhook receiver', () => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const address = server.address()
  if (address === null || typeof address !== 'object') throw new Error('webhook receiver: no port')
  return `http://127.0.0.1:${address.port}`
}

const label = (backend: string, backlog: boolean): string => `${backend} ${backlog ? 'backlog' : 'no backlog'}`

/** The settings both twins run with: the service's defaults but for what the seeded backlog needs. */
function twinEnv(sizes: BenchSizes): Record<string, string> {
  return {
    PLANTSTORE_WEBHOOK_DELIVERY: 'true',
    // The receiver is on loopback, which webhooks may not reach by default.
    PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
    // Room above the seeded queues: at the cap, the noisy account's next change would disable its subscriptions.
    PLANTSTORE_WEBHOOK_MAX_QUEUED: String(Math.max(10_000, 2 * sizes.backlog)),
    PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: String(BACKLOG_SUBSCRIPTIONS),
  }
}

async function seedTwin(
  backend: Backend,
  tag: string,
  backlog: boolean,
  sizes: BenchSizes,
  receiverUrl: string,
  context: ServerContext,
  postgresUrl: string | undefined,
): Promise<TwinSeed> {
  const databaseUrl = await freshDatabase(backend, backlog ? 'backlog' : 'nobacklog', context, postgresUrl)
  const started = performance.now()
  const [listed] = await bulkSeed(databaseUrl, [{ name: ACCOUNT_NAMES.list, plants: sizes.list }])
  const plan = {
    receiverUrl,
    subscriptions: BACKLOG_SUBSCRIPTIONS,
    events: sizes.backlog,
    queue: backlog,
  }
  const seeded = await seedBacklog(databaseUrl, plan)
  const what = backlog ? `${count(seeded.queued)} deliveries queued` : 'nothing queued'
  const line =
    `${label(backend + tag, backlog)}: listed ${count(sizes.list)} plants in ${listed?.insertSeconds.toFixed(1)} s; ` +
    `other account's subscriptions, plants and ${what} in ${seeded.seconds.toFixed(1)} s; ` +
    `${((performance.now() - started) / 1000).toFixed(1)} s in all`
  return { backend, backlog, databaseUrl, token: listed?.token ?? '', queued: seeded.queued, line }
}

/** Seeds both twins of every backend side by side. */
export async function seedTwins(
  sizes: BenchSizes,
  postgresUrl: string | undefined,
  context: ServerContext,
  tag: string,
): Promise<SeededTwins> {
  const receiver = await startReceiver(context)
  const backends = BACKENDS.filter((backend) => backend === 'SQLite' || postgresUrl !== undefined)
  const seeds = await settleAll(
    backends.flatMap((backend) =>
      [false, true].map((backlog) => seedTwin(backend, tag, backlog, sizes, receiver, context, postgresUrl)),
    ),
  )
  const settings = Object.entries(twinEnv(sizes)).map(([key, value]) => `${key}=${value}`)
  return {
    seeds,
    tag,
    lines: [
      'Backlog twins, per backend: two databases seeded alike, each with the listed account (plants 1..n as above) ' +
        `and another account holding plants 1..${count(sizes.backlog)} and ${BACKLOG_SUBSCRIPTIONS} webhook ` +
        'subscriptions (through src/webhooks/subscribe.ts) to a receiver the harness runs on loopback, which ' +
        `answers 204 after ${RECEIVER_DELAY_MS} ms. In the twin with the backlog each of those plants' ` +
        'plant.created event is queued for every subscription, as the service queues them (bench/backlog-seed.ts). ' +
        `Both twins run with ${settings.join(', ')}; their services start only for the backlog scenarios.`,
      ...seeds.map((seed) => seed.line),
    ],
  }
}

/** Starts the twins' services side by side, and checks each sees the queue it was seeded with. */
export async function startTwins(seeded: SeededTwins, sizes: BenchSizes, context: ServerContext) {
  const rank = (seed: TwinSeed) => BACKENDS.indexOf(seed.backend) * 2 + Number(seed.backlog)
  const ordered = [...seeded.seeds].sort((a, b) => rank(a) - rank(b))
  const targets = await Promise.all(
    ordered.map(async (seed): Promise<Target> => {
      const name = label(seed.backend + seeded.tag, seed.backlog)
      const server = await startService(name, seed.databaseUrl, seed.token, context, { env: twinEnv(sizes) })
      const depth = (await scrapeDispatcher(server.url)).queueDepth
      // The dispatcher starts delivering at once: a few may be gone already, none may be added.
      if (depth > seed.queued || seed.queued > 0 !== depth > 0) {
        throw new Error(`${server.label}: queue depth ${depth} at start, seeded ${seed.queued}`)
      }
      const twin = { backend: seed.backend, backlog: seed.backlog }
      return { ...newTarget(server, { list: seed.token }, seed.databaseUrl), twin }
    }),
  )
  const backends = [...new Set(ordered.map((seed) => seed.backend + seeded.tag))]
  const pairs: TwinPair[] = backends.map((backend) => ({
    backend,
    without: label(backend, false),
    with: label(backend, true),
  }))
  return { targets, pairs }
}

/**
 * After the backlog scenarios, per twin (stopped first): every POST /plants it answered 200 (each a new plant:
 * fresh ids) must be in its database. A write acknowledged inside a transaction that never commits would be gone.
 */
export async function checkTwinWrites(targets: Target[], sizes: BenchSizes) {
  const lines: string[] = []
  const problems: string[] = []
  for (const target of targets) {
    const answered = (await scrapeMetrics(target.server.url))
      .filter((s) => s.name === 'plantstore_http_requests_total' && s.labels.route === '/plants')
      .filter((s) => s.labels.method === 'POST' && s.labels.status === '200')
      .reduce((sum, s) => sum + s.value, 0)
    await target.server.stop()
    const stored = (await countPlants(target.databaseUrl ?? '', ACCOUNT_NAMES.list)) - sizes.list
    const line = `${target.server.label}: ${answered} POST /plants answered 200, ${stored} new plants stored`
    lines.push(line)
    if (stored < answered) problems.push(`${line}: ${answered - stored} acknowledged creates lost`)
  }
  return { lines, problems }
}
