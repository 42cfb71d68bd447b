/**
 * Seeds the noisy account of the backlog scenarios into a database bench/bulk-seed.ts has set up, before the
 * service starts: its webhook subscriptions, its plants, and (on the twin with the backlog) one queued
 * `plant.created` delivery per plant and subscription, as the service queues them when the plants are created and
 * the receiver cannot keep up. The rows are the service's own: subscriptions through src/webhooks/subscribe.ts
 * (what `plantstore webhooks add` and POST /webhooks run), event ids and bodies from src/webhooks/events.ts, each
 * subscription's `queued` set to the pending rows behind it (migration 4's own statement).
 */
import Database from 'better-sqlite3'
import postgres from 'postgres'
import { openStorage } from '../src/storage/index.js'
import { plantCreated } from '../src/webhooks/events.js'
import { subscribe } from '../src/webhooks/subscribe.js'
import { checkPlantCounts, insertPlants } from './bulk-seed.js'
import { seedPlant } from './plants.js'
import { NOISY_ACCOUNT } from './scenarios.js'

export interface BacklogPlan {
  /** Where the subscriptions point: the harness's receiver on loopback. */
  receiverUrl: string
  subscriptions: number
  /** Plants of the noisy account, 1..events; with `queue`, one event each, queued for every subscription. */
  events: number
  /** The twin with the backlog queues the deliveries; the one without has the same account and nothing queued. */
  queue: boolean
}

const QUEUED_SQL = `UPDATE webhook_subscriptions SET queued = (SELECT count(*) FROM webhook_deliveries d
  WHERE d.subscription_id = webhook_subscriptions.id AND d.state = 'pending')`
const TOTALS_SQL = `SELECT (SELECT coalesce(sum(queued), 0) FROM webhook_subscriptions) AS queued,
  (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending') AS pending`

/** The plant.created event of plant `id`, as the service writes it. */
function eventOf(id: number): { eventId: string; body: string } {
  const plant = seedPlant(id)
  const event = plantCreated({ id: BigInt(id), name: plant.name, tag: plant.tag ?? null })
  return { eventId: event.id, body: event.body }
}

/**
 * Through the service's storage in this process rather than `plantstore webhooks add`: a process start per
 * subscription (half a second of CPU each, 40 in a run with PostgreSQL) would double the quick run's seeding.
 */
async function subscribeNoisy(databaseUrl: string, plan: BacklogPlan): Promise<void> {
  const storage = await openStorage(databaseUrl, {
    migrate: false,
    poolSize: 1,
    limits: { plantsPerAccount: 0, subscriptionsPerAccount: plan.subscriptions, queuedPerSubscription: 0 },
  })
  try {
    for (let i = 1; i <= plan.subscriptions; i++) {
      await subscribe(storage.webhooks, { accountName: NOISY_ACCOUNT, url: `${plan.receiverUrl}/noisy/${i}` })
    }
  } finally {
    await storage.close()
  }
}

/** Events 1..events queued in the order the service queues them: per event, a row per subscription. */
function queueSqlite(file: string, events: number): void {
  const db = new Database(file, { timeout: 10_000 })
  try {
    const subscriptions = db
      .prepare(
        `SELECT s.id FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id WHERE a.name = ? ORDER BY s.id`,
      )
      .pluck()
      .all(NOISY_ACCOUNT) as string[]
    const insert = db.prepare(
      `INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
       VALUES (?, ?, 'plant.created', ?, ?, ?)`,
    )
    // The events of the last `events` milliseconds before the service starts, oldest first.
    const first = Date.now() - events
    db.transaction(() => {
      for (let id = 1; id <= events; id++) {
        const { eventId, body } = eventOf(id)
        for (const subscription of subscriptions) insert.run(subscription, eventId, body, first + id, first + id)
      }
      db.exec(QUEUED_SQL)
    })()
  } finally {
    db.close()
  }
}

/** The same in one INSERT … SELECT: the events as arrays, crossed with the subscriptions. */
async function queuePostgres(sql: postgres.Sql, events: number): Promise<void> {
  const made = Array.from({ length: events }, (_, i) => eventOf(i + 1))
  const ids = made.map((event) => event.eventId)
  const bodies = made.map((event) => event.body)
  await sql.begin(async (tx) => {
    await tx`INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
      SELECT s.id, e.event_id, 'plant.created', e.body, e.at, e.at
      FROM (SELECT event_id, body, n, now() - (${events} - n) * interval '1 millisecond' AS at
        FROM unnest(${ids}::text[], ${bodies}::text[]) WITH ORDINALITY AS u(event_id, body, n)) e
      CROSS JOIN (SELECT s.id FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id
        WHERE a.name = ${NOISY_ACCOUNT}) s
      ORDER BY e.n, s.id`
    await tx.unsafe(QUEUED_SQL)
  })
}

/** Queue totals: the subscriptions' counts and the pending rows; both must be what was seeded. */
async function checkQueued(databaseUrl: string, sql: postgres.Sql | undefined, expected: number): Promise<void> {
  let totals: { queued: number | string; pending: number | string } | undefined
  if (sql === undefined) {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true })
    try {
      totals = db.prepare(TOTALS_SQL).get() as typeof totals
    } finally {
      db.close()
    }
  } else {
    ;[totals] = await sql.unsafe(TOTALS_SQL)
  }
  if (Number(totals?.queued) !== expected || Number(totals?.pending) !== expected) {
    throw new Error(
      `backlog seed: ${totals?.pending} pending deliveries and queued counts adding up to ${totals?.queued}, ` +
        `expected ${expected}`,
    )
  }
}

/** Seeds the noisy account; returns the deliveries queued and the seconds it took. */
export async function seedBacklog(
  databaseUrl: string,
  plan: BacklogPlan,
): Promise<{ queued: number; seconds: number }> {
  const started = performance.now()
  await subscribeNoisy(databaseUrl, plan)
  await insertPlants(databaseUrl, NOISY_ACCOUNT, { start: 1, end: plan.events + 1 })
  const queued = plan.queue ? plan.events * plan.subscriptions : 0
  if (databaseUrl.startsWith('sqlite:')) {
    if (plan.queue) queueSqlite(databaseUrl.slice('sqlite:'.length), plan.events)
    await checkQueued(databaseUrl, undefined, queued)
  } else {
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
    try {
      if (plan.queue) await queuePostgres(sql, plan.events)
      await checkQueued(databaseUrl, sql, queued)
      // What autovacuum would soon do after so many inserts, as bench/bulk-seed.ts does for plants.
      await sql`VACUUM (ANALYZE) plants, plant_counts, webhook_subscriptions, webhook_deliveries`
    } finally {
      await sql.end()
    }
  }
  await checkPlantCounts(databaseUrl)
  return { queued, seconds: (performance.now() - started) / 1000 }
}
