import { randomUUID } from 'node:crypto'
import type { Database, Statement } from 'better-sqlite3'
import type { EventType } from '../../webhooks/events.js'
import type { ClaimedDelivery, DeliveryOutcome, NewSubscription, Subscription } from '../types.js'
import { toClaimedDelivery, type DeliveryRow } from '../delivery-row.js'
import { ensureAccount } from './accounts.js'
import { guard } from './errors.js'
import type { GroupCommit } from './group-commit.js'

interface SubscriptionRow {
  id: string
  account_id: number
  account_name: string
  url: string
  event_types: string
  created_at: number
}

const SUBSCRIPTION_COLUMNS = `s.id, s.account_id, a.name AS account_name, s.url, s.event_types, s.created_at`

function toSubscription(row: SubscriptionRow): Subscription {
  return {
    id: row.id,
    accountId: row.account_id,
    accountName: row.account_name,
    url: row.url,
    eventTypes: row.event_types.split(' ') as EventType[],
    createdAt: new Date(row.created_at),
  }
}

// Due, and the oldest pending delivery of its subscription: one attempt in flight per subscription, in order.
const DUE = `state = 'pending' AND next_attempt_at <= ?
  AND id = (SELECT min(o.id) FROM webhook_deliveries o WHERE o.subscription_id = d.subscription_id AND o.state = 'pending')`

/** Webhook subscriptions and the outbox of deliveries, on the SQLite connection of the storage. */
export class SqliteWebhooks {
  readonly #db: Database
  readonly #writes: GroupCommit
  readonly #hasSubscriptions: Statement
  readonly #queue: Statement
  readonly #anyDue: Statement
  readonly #due: Statement
  readonly #lease: Statement
  readonly #claimed: Statement

  constructor(db: Database, writes: GroupCommit) {
    this.#db = db
    this.#writes = writes
    this.#hasSubscriptions = db.prepare('SELECT 1 FROM webhook_subscriptions WHERE account_id = ? LIMIT 1').pluck()
    this.#queue = db.prepare(
      `INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, created_at, next_attempt_at)
       SELECT id, ?, ?, ?, ?, ? FROM webhook_subscriptions
       WHERE account_id = ? AND instr(' ' || event_types || ' ', ' ' || ? || ' ') > 0`,
    )
    this.#anyDue = db.prepare(`SELECT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE ${DUE})`).pluck()
    this.#due = db.prepare(`SELECT id FROM webhook_deliveries d WHERE ${DUE} ORDER BY id LIMIT ?`).pluck()
    this.#lease = db.prepare(
      `UPDATE webhook_deliveries SET lease = ?, next_attempt_at = ?, first_attempt_at = coalesce(first_attempt_at, ?)
       WHERE id = ?`,
    )
    this.#claimed = db.prepare(
      `SELECT d.id, d.event_id, d.event_type, d.body, d.created_at, d.first_attempt_at, d.attempts, d.subscription_id,
         s.url, s.secret
       FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.id = ?`,
    )
  }

  /** True when the account has a subscription, so its plant changes must queue events. */
  hasSubscriptions(accountId: number): boolean {
    return this.#hasSubscriptions.get(accountId) !== undefined
  }

  /** Queues `type` for every subscription of the account that wants it; call inside the change's transaction. */
  queue(accountId: number, type: EventType, eventId: string, body: string): void {
    const now = Date.now()
    this.#queue.run(eventId, type, body, now, now, accountId, type)
  }

  async createSubscription(subscription: NewSubscription): Promise<Subscription> {
    const db = this.#db
    guard(() =>
      db
        .transaction(() => {
          const accountId = ensureAccount(db, subscription.accountName)
          db.prepare(
            `INSERT INTO webhook_subscriptions (id, account_id, url, secret, event_types, created_at)
             VALUES (?, ?, ?, ?, ?, ?)`,
          ).run(
            subscription.id,
            accountId,
            subscription.url,
            subscription.secret,
            subscription.eventTypes.join(' '),
            Date.now(),
          )
        })
        .immediate(),
    )
    return (await this.listSubscriptions({ id: subscription.id }))[0]!
  }

  async listSubscriptions(
    filter: { accountId?: number; accountName?: string; id?: string } = {},
  ): Promise<Subscription[]> {
    const conditions = (
      [
        ['s.id = ?', filter.id],
        ['s.account_id = ?', filter.accountId],
        ['a.name = ?', filter.accountName],
      ] as const
    ).filter(([, value]) => value !== undefined)
    const where = conditions.map(([condition]) => condition)
    const args = conditions.map(([, value]) => value)
    const sql = `SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id
      ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY s.created_at, s.id`
    const rows = guard(() => this.#db.prepare(sql).all(...args)) as SubscriptionRow[]
    return rows.map(toSubscription)
  }

  async deleteSubscription(id: string, accountId?: number): Promise<boolean> {
    const db = this.#db
    const remove = db.transaction(() => {
      const scoped = accountId === undefined ? '' : ' AND account_id = ?'
      const args = accountId === undefined ? [id] : [id, accountId]
      if (db.prepare(`DELETE FROM webhook_subscriptions WHERE id = ?${scoped}`).run(...args).changes === 0) return false
      db.prepare("DELETE FROM webhook_deliveries WHERE subscription_id = ? AND state = 'pending'").run(id)
      return true
    })
    return guard(() => remove.immediate())
  }

  /** Claims due deliveries; `busy` runs the claim with a short wait for another process's lock. */
  async claimDeliveries(limit: number, leaseMs: number, busy: <T>(fn: () => T) => T): Promise<ClaimedDelivery[]> {
    const now = Date.now()
    // A read first: an idle outbox costs no write lock.
    if (guard(() => this.#anyDue.get(now)) === 0) return []
    const lease = randomUUID()
    const claim = this.#db.transaction(() => {
      const ids = this.#due.all(now, limit) as number[]
      for (const id of ids) this.#lease.run(lease, now + leaseMs, now, id)
      return ids.map((id) => this.#claimed.get(id) as DeliveryRow)
    })
    const rows = busy(() => guard(() => claim.immediate()))
    return rows.map((row) => toClaimedDelivery(row, lease))
  }

  finishDelivery(delivery: Pick<ClaimedDelivery, 'id' | 'lease'>, outcome: DeliveryOutcome): Promise<void> {
    const key = [Number(delivery.id), delivery.lease]
    const db = this.#db
    return this.#writes.run(() => {
      if (outcome.state === 'delivered') {
        db.prepare('DELETE FROM webhook_deliveries WHERE id = ? AND lease = ?').run(...key)
        return
      }
      const next = outcome.state === 'retry' ? outcome.nextAttemptAt.getTime() : Date.now()
      db.prepare(
        `UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1, next_attempt_at = ?, lease = NULL,
           last_status = ?, last_error = ? WHERE id = ? AND lease = ?`,
      ).run(outcome.state === 'retry' ? 'pending' : 'failed', next, outcome.status, outcome.error, ...key)
    })
  }

  async countPendingDeliveries(): Promise<number> {
    const sql = "SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'"
    return guard(() => this.#db.prepare(sql).pluck().get()) as number
  }
}
