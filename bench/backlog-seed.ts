/**
 * Seeds the backlog scenarios' noisy account into a database bench/bulk-seed.ts has set up, before the service
 * starts: its webhook subscriptions, its plants and (on the twin with the backlog) one queued `plant.created`
 * delivery per plant and subscription, as the service queues them when the receiver cannot keep up. The rows are
 * the service's own: subscriptions through src/webhooks/subscribe.ts, events from src/webhooks/events.ts, each
 * subscription's `queued` set to the pending rows behind it (migration 4's own statement).
 */
import { openStorage } from '../src/storage/index.js'
import { plantCreated } from '../src/webhooks/events.js'
import { subscribe } from '../src/webhooks/subscribe.js'
import { checkPlantCounts, insertPlants } from './bulk-seed.js'
import { queryRows, withPostgres, withSqlite } from './databases.js'
import { seedPlant } from './plants.js'
import { NOISY_ACCOUNT } from './scenarios.js'

export interface BacklogPlan {
  /** Where the subscriptions point: the harness's receiver on loopback. */
  receiverUrl: string
  subscriptions: number
  /** Plants of the noisy account, 1..events; with `queue`, one event each, queued for every subscription. */
  events: number
  queue: boolean
}

const QUEUED_SQL = `UPDATE webhook_subscriptions SET queued = (SELECT count(*) FROM webhook_deliveries d
  WHERE d.subscription_id = webhook_subscriptions.id AND d.state = 'pending')`

function eventOf(id: number): { eventId: string; body: string } {
  const plant = seedPlant(id)
  const event = plantCreated({ id: BigInt(id), name: plant.name, tag: plant.tag ?? null })
  return { eventId: event.id, body: event.body }
}

/** Through the service's storage in this process: a `plantstore webhooks add` process each would double the seeding. */
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

/** Events 1..events queued in the service's order (per event, a row per subscription), the newest just now. */
async function queueEvents(databaseUrl: string, events: number): Promise<void> {
  const made = Array.from({ length: events }, (_, i) => eventOf(i + 1))
  if (databaseUrl.startsWith('sqlite:')) {
    return withSqlite(
      databaseUrl.slice('sqlite:'.length),
      (db) => {
        const subscriptions = db
          .prepare(
            'SELECT s.id FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id WHERE a.name = ? ORDER BY s.id',
          )
          .pluck()
          .all(NOISY_ACCOUNT) as string[]
        const insert = db.prepare(
          `INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
           VALUES (?, ?, 'plant.created', ?, ?, ?)`,
        )
        const first = Date.now() - events
        db.transaction(() => {
          made.forEach(({ eventId, body }, i) => {
            for (const subscription of subscriptions)
              insert.run(subscription, eventId, body, first + i + 1, first + i + 1)
          })
          db.exec(QUEUED_SQL)
        })()
      },
      true,
    )
  }
  const ids = made.map((event) => event.eventId)
  const bodies = made.map((event) => event.body)
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

/** Seeds the noisy account and checks the queue is what was seeded; the deliveries queued and the seconds taken. */
export async function seedBacklog(
  databaseUrl: string,
  plan: BacklogPlan,
): Promise<{ queued: number; seconds: number }> {
  const started = performance.now()
  await subscribeNoisy(databaseUrl, plan)
  await insertPlants(databaseUrl, NOISY_ACCOUNT, { start: 1, end: plan.events + 1 })
  const queued = plan.queue ? plan.events * plan.subscriptions : 0
  if (plan.queue) await queueEvents(databaseUrl, plan.events)
  const [totals] = await queryRows<{ queued: number | string; pending: number | string }>(
    databaseUrl,
    `SELECT (SELECT coalesce(sum(queued), 0) FROM webhook_subscriptions) AS queued,
      (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending') AS pending`,
  )
  if (Number(totals?.queued) !== queued || Number(totals?.pending) !== queued) {
    throw new Error(`backlog seed: ${totals?.pending} pending, queued counts ${totals?.queued}, expected ${queued}`)
  }
  if (!databaseUrl.startsWith('sqlite:')) {
    // What autovacuum would soon do after so many inserts, as for the plants.
    await withPostgres(databaseUrl, async (sql) => {
      await sql`VACUUM (ANALYZE) plants, plant_counts, webhook_subscriptions, webhook_deliveries`
    })
  }
  await checkPlantCounts(databaseUrl)
  return { queued, seconds: (performance.now() - started) / 1000 }
}
