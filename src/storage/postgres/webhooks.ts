import { randomUUID } from 'node:crypto'
import type { EventType } from '../../webhooks/events.js'
import type { ClaimedDelivery, DeliveryOutcome, NewSubscription, Subscription } from '../types.js'
import { toClaimedDelivery, type DeliveryRow } from '../delivery-row.js'
import type { Query, Sql } from './client.js'
import { guard } from './errors.js'

interface SubscriptionRow {
  id: string
  account_id: bigint
  account_name: string
  url: string
  event_types: string
  created_at: Date
}

function toSubscription(row: SubscriptionRow): Subscription {
  return {
    id: row.id,
    accountId: Number(row.account_id),
    accountName: row.account_name,
    url: row.url,
    eventTypes: row.event_types.split(' ') as EventType[],
    createdAt: row.created_at,
  }
}

/**
 * The part of a plant change's statement that queues its events: a CTE inserting one delivery per subscription of
 * the account that wants `type`, for each row the change's CTE `changed` returned. One statement, so the change
 * and its events commit together.
 */
export function queueEvents(sql: Query, accountId: number, type: EventType, eventId: string, body: string) {
  return sql`queued AS (
    INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
    SELECT s.id, ${eventId}, ${type}, ${body}, now(), now() FROM changed, webhook_subscriptions s
    WHERE s.account_id = ${accountId} AND position(${' ' + type + ' '} IN ' ' || s.event_types || ' ') > 0)`
}

/** Webhook subscriptions and the outbox of deliveries, on the storage's PostgreSQL pool. */
export class PostgresWebhooks {
  readonly #sql: Sql

  constructor(sql: Sql) {
    this.#sql = sql
  }

  async createSubscription(subscription: NewSubscription): Promise<Subscription> {
    await guard(() =>
      this.#sql.begin(async (tx) => {
        await tx`INSERT INTO accounts (name, created_at) VALUES (${subscription.accountName}, now())
          ON CONFLICT (name) DO NOTHING`
        await tx`INSERT INTO webhook_subscriptions (id, account_id, url, secret, event_types, created_at)
          SELECT ${subscription.id}, id, ${subscription.url}, ${subscription.secret},
            ${subscription.eventTypes.join(' ')}, now()
          FROM accounts WHERE name = ${subscription.accountName}`
      }),
    )
    return (await this.listSubscriptions({ id: subscription.id }))[0]!
  }

  async listSubscriptions(filter: { accountId?: number; accountName?: string; id?: string } = {}) {
    const sql = this.#sql
    const byId = filter.id === undefined ? sql`` : sql`AND s.id = ${filter.id}`
    const byAccount = filter.accountId === undefined ? sql`` : sql`AND s.account_id = ${filter.accountId}`
    const byName = filter.accountName === undefined ? sql`` : sql`AND a.name = ${filter.accountName}`
    const rows = await guard(
      () => sql<SubscriptionRow[]>`SELECT s.id, s.account_id, a.name AS account_name, s.url, s.event_types,
        s.created_at FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id
        WHERE true ${byId} ${byAccount} ${byName} ORDER BY s.created_at, s.id`,
    )
    return rows.map(toSubscription)
  }

  async deleteSubscription(id: string, accountId?: number): Promise<boolean> {
    const scoped = (sql: Query) => (accountId === undefined ? sql`` : sql`AND account_id = ${accountId}`)
    return guard(() =>
      this.#sql.begin(async (tx) => {
        const removed = await tx`DELETE FROM webhook_subscriptions WHERE id = ${id} ${scoped(tx)}`
        if (removed.count === 0) return false
        await tx`DELETE FROM webhook_deliveries WHERE subscription_id = ${id} AND state = 'pending'`
        return true
      }),
    )
  }

  async claimDeliveries(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const sql = this.#sql
    const lease = randomUUID()
    // SKIP LOCKED: two dispatchers never claim the same row; a row another claim just leased is no longer due when
    // this statement re-reads it. The oldest pending per subscription only, to keep each subscription's order.
    const rows = await guard(
      () => sql<DeliveryRow[]>`WITH due AS (
          SELECT d.id FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
          WHERE d.state = 'pending' AND d.next_attempt_at <= now()
            AND d.id = (SELECT min(o.id) FROM webhook_deliveries o
              WHERE o.subscription_id = d.subscription_id AND o.state = 'pending')
          ORDER BY d.id LIMIT ${limit} FOR UPDATE OF d SKIP LOCKED)
        UPDATE webhook_deliveries d SET lease = ${lease},
          next_attempt_at = now() + ${leaseMs} * interval '1 millisecond',
          first_attempt_at = coalesce(d.first_attempt_at, now())
        FROM due, webhook_subscriptions s WHERE d.id = due.id AND s.id = d.subscription_id
        RETURNING d.id::text AS id, d.event_id, d.event_type, d.body, d.created_at, d.first_attempt_at, d.attempts,
          d.subscription_id,
          s.url, s.secret`,
    )
    return rows.map((row) => toClaimedDelivery(row, lease))
  }

  async finishDelivery(delivery: Pick<ClaimedDelivery, 'id' | 'lease'>, outcome: DeliveryOutcome): Promise<void> {
    const sql = this.#sql
    const id = BigInt(delivery.id)
    if (outcome.state === 'delivered') {
      await guard(() => sql`DELETE FROM webhook_deliveries WHERE id = ${id} AND lease = ${delivery.lease}`)
      return
    }
    const state = outcome.state === 'retry' ? 'pending' : 'failed'
    const next = outcome.state === 'retry' ? outcome.nextAttemptAt : new Date()
    await guard(
      () => sql`UPDATE webhook_deliveries SET state = ${state}, attempts = attempts + 1, next_attempt_at = ${next},
        lease = NULL, last_status = ${outcome.status}, last_error = ${outcome.error}
        WHERE id = ${id} AND lease = ${delivery.lease}`,
    )
  }

  async countPendingDeliveries(): Promise<number> {
    const sql = this.#sql
    const [row] = await guard(
      () => sql<{ n: bigint }[]>`SELECT count(*) AS n FROM webhook_deliveries d
        JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.state = 'pending'`,
    )
    return Number(row!.n)
  }
}
