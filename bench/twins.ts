/**
 * The backlog scenarios' services: per backend, twins on databases seeded alike (the listed account, and a noisy
 * account with its plants and webhook subscriptions to the harness's receiver), one also holding one queued
 * `plant.created` delivery per noisy plant and subscription, as the service queues them when the receiver cannot
 * keep up. The rows are the service's own: subscriptions through src/webhooks/subscribe.ts, events from
 * src/webhooks/events.ts, each subscription's `queued` set to the pending rows behind it (migration 4's statement).
 * Seeded and started only when the backlog scenarios run: the twin with the backlog delivers all the while it runs.
 */
import { createServer } from 'node:http'
import { NO_LIMITS, openStorage } from '../src/storage/index.js'
import { plantCreated } from '../src/webhooks/events.js'
import { subscribe } from '../src/webhooks/subscribe.js'
import { bulkSeed, countPlants, insertPlants } from './bulk-seed.js'
import { settleAll } from './cleanup.js'
import { freshDatabase, withPostgres, withSqlite, type Backend } from './databases.js'
import { scrapeDispatcher, scrapeMetrics, total } from './http.js'
import { seedPlant } from './plants.js'
import { newTarget, type Pair, type Target } from './rounds.js'
import { ACCOUNT_NAMES, BACKLOG_SUBSCRIPTIONS, NOISY_ACCOUNT, type BenchSizes } from './scenarios.js'
import { startService, type ServerContext } from './servers.js'

const QUEUED_SQL = `UPDATE webhook_subscriptions SET queued = (SELECT count(*) FROM webhook_deliveries d
  WHERE d.subscription_id = webhook_subscriptions.id AND d.state = 'pending')`

/** Through the service's storage in this process: a `plantstore webhooks add` process each would double the seeding. */
async function subscribeNoisy(databaseUrl: string, receiverUrl: string): Promise<void> {
  const limits = { ...NO_LIMITS, subscriptionsPerAccount: BACKLOG_SUBSCRIPTIONS }
  const storage = await openStorage(databaseUrl, { migrate: false, poolSize: 1, limits })
  try {
    for (let i = 1; i <= BACKLOG_SUBSCRIPTIONS; i++)
      await subscribe(storage.webhooks, { accountName: NOISY_ACCOUNT, url: `${receiverUrl}/noisy/${i}` })
  } finally {
    await storage.close()
  }
}

/** Events 1..events queued in the service's order (per event, a row per subscription), the newest just now. */
async function queueEvents(databaseUrl: string, events: number): Promise<void> {
  const made = Array.from({ length: events }, (_, i) => {
    const plant = seedPlant(i + 1)
    return plantCreated({ id: BigInt(i + 1), name: plant.name, tag: plant.tag ?? null })
  })
  if (databaseUrl.startsWith('sqlite:')) {
    return withSqlite(databaseUrl, (db) => {
      const query =
        'SELECT s.id FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id WHERE a.name = ? ORDER BY s.id'
      const subscriptions = db.prepare(query).pluck().all(NOISY_ACCOUNT) as string[]
      const insert = db.prepare(
        `INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
           VALUES (?, ?, 'plant.created', ?, ?, ?)`,
      )
      const first = Date.now() - events + 1
      db.transaction(() => {
        made.forEach(({ id, body }, i) => {
          for (const subscription of subscriptions) insert.run(subscription, id, body, first + i, first + i)
        })
        db.exec(QUEUED_SQL)
      })()
    })
  }
  const [ids, bodies] = [made.map((event) => event.id), made.map((event) => event.body)]
  await withPostgres(databaseUrl, (sql) =>
    sql.begin(async (tx) => {
      await tx`INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
        SELECT s.id, e.event_id, 'plant.created', e.body, e.at, e.at
        FROM (SELECT event_id, body, n, now() - (${events} - n) * interval '1 millisecond' AS at
          FROM unnest(${ids}::text[], ${bodies}::text[]) WITH ORDINALITY AS u(event_id, body, n)) e
        CROSS JOIN (SELECT s.id FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id
          WHERE a.name = ${NOISY_ACCOUNT}) s
        ORDER BY e.n, s.id`
      await tx.unsafe(QUEUED_SQL)
    }),
  )
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  context.cleanup.add('stop webhook receiver', () => server.close().closeAllConnections())
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`
}

/** The settings both twins run with: the service's defaults but for what the seeded backlog needs. */
const twinEnv = (sizes: BenchSizes): Record<string, string> => ({
  PLANTSTORE_WEBHOOK_DELIVERY: 'true',
  // The receiver is on loopback, which webhooks may not reach by default.
  PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
  // Room above the seeded queues: at the cap, the noisy account's next change would disable its subscriptions.
  PLANTSTORE_WEBHOOK_MAX_QUEUED: String(Math.max(10_000, 2 * sizes.backlog)),
  PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: String(BACKLOG_SUBSCRIPTIONS),
})

/**
 * Seeds both twins of every backend side by side, then starts their services (without, with, per backend), each
 * checked to see the queue seeded; `tag` labels the harness's Node in a run of several.
 */
export async function startTwins(
  backends: Backend[],
  sizes: BenchSizes,
  postgresUrl: string | undefined,
  context: ServerContext,
  tag: string,
) {
  const receiver = await startReceiver(context)
  const label = (backend: Backend, backlog: boolean) => `${backend}${tag} ${backlog ? 'backlog' : 'no backlog'}`
  const pairs: Pair[] = backends.map((backend) => ({
    ...{ name: backend + tag, without: label(backend, false), with: label(backend, true) },
  }))
  const startTwin = async (backend: Backend, backlog: boolean): Promise<Target> => {
    const databaseUrl = await freshDatabase(backend, backlog ? 'backlog' : 'nobacklog', context, postgresUrl)
    const token = (await bulkSeed(databaseUrl, [{ name: ACCOUNT_NAMES.list, plants: sizes.list }]))[0]?.token ?? ''
    // The noisy account: plants 1..backlog and subscriptions; on the twin with the backlog, each plant's event queued.
    await subscribeNoisy(databaseUrl, receiver)
    await insertPlants(databaseUrl, NOISY_ACCOUNT, { start: 1, end: sizes.backlog + 1 })
    if (backlog) await queueEvents(databaseUrl, sizes.backlog)
    // What autovacuum would soon do after so many inserts, as for the plants.
    const vacuum = 'VACUUM (ANALYZE) plants, plant_counts, webhook_subscriptions, webhook_deliveries'
    if (backend === 'PostgreSQL') await withPostgres(databaseUrl, (sql) => sql.unsafe(vacuum))
    const queued = backlog ? sizes.backlog * BACKLOG_SUBSCRIPTIONS : 0
    const server = await startService(label(backend, backlog), databaseUrl, token, context, { env: twinEnv(sizes) })
    const depth = (await scrapeDispatcher(server.url)).queueDepth
    // The dispatcher starts delivering at once: a few may be gone already, none may be added.
    if (depth > queued || queued > 0 !== depth > 0)
      throw new Error(`${server.label}: queue depth ${depth} at start, seeded ${queued}`)
    return newTarget(server, { list: token }, databaseUrl)
  }
  const targets = await settleAll(backends.flatMap((backend) => [startTwin(backend, false), startTwin(backend, true)]))
  const settings = Object.entries(twinEnv(sizes)).map(([key, value]) => `${key}=${value}`)
  const line = `Backlog twins (bench/twins.ts), the other account's receiver answering in ${RECEIVER_DELAY_MS} ms: ${settings.join(' ')}`
  return { targets, pairs, line }
}

/**
 * After the backlog scenarios, per twin (stopped first): every POST /plants it answered 200 (each a new plant:
 * fresh ids) must be in its database. A write acknowledged inside a transaction that never commits would be gone.
 * The report's note on it, and a line per twin that lost writes.
 */
export async function checkTwinWrites(targets: Target[], sizes: BenchSizes) {
  const lines: string[] = []
  const problems: string[] = []
  for (const target of targets) {
    const labels = { route: '/plants', method: 'POST', status: '200' }
    const answered = total(await scrapeMetrics(target.server.url), 'plantstore_http_requests_total', labels)
    await target.server.stop()
    const stored = (await countPlants(target.databaseUrl ?? '', ACCOUNT_NAMES.list)) - sizes.list
    const line = `${target.server.label}: ${answered} POST /plants answered 200, ${stored} new plants stored`
    lines.push(line)
    if (stored < answered) problems.push(`${line}: ${answered - stored} acknowledged creates lost`)
  }
  return { note: `writes checked after the backlog scenarios, each twin stopped first: ${lines.join('; ')}`, problems }
}
