import { randomUUID } from 'node:crypto'
import type { Database, Statement } from 'better-sqlite3'
import {
  ATTEMPTS_KEPT,
  QuotaExceededError,
  SETTLE_BATCH,
  type ClaimedDelivery,
  type DeliveryHistory,
  type DeliveryOutcome,
  type DeliveryRef,
  type DisabledReason,
  type NewSubscription,
  type OutboxEvent,
  type StorageLimits,
  type Subscription,
  type SubscriptionFilter,
  type WebhookStore,
} from '../types.js'
import {
  SUBSCRIPTION_COLUMNS,
  toClaimedDelivery,
  toSubscription,
  type DeliveryRow,
  type SubscriptionRow,
} from '../rows.js'
import { claimWindow, GIVEN_UP, wants } from '../webhook-rules.js'
import { ensureAccount } from './accounts.js'
import { briefly } from './database.js'
import { guard } from './errors.js'
import type { GroupCommit } from './group-commit.js'

/** A disabled subscription whose queue is still to be failed. */
interface SettleTarget {
  id: string
  disabled_at: number
  disabled_reason: DisabledReason
}

// The subscriptions to lease next, fairly: among those ready (active, something queued, backoff and lease over),
// skip accounts already holding `perAccount` leases; rank each account's candidates after the leases it holds, and
// take the lowest ranks first, so an account holding fewer attempts in flight goes before one holding more. The
// candidates come off the partial index in due order, at most `window` of them: the work is bounded whatever the
// backlog.
const CHOOSE = `WITH busy AS (
    SELECT account_id, count(*) AS n FROM webhook_subscriptions
    WHERE lease IS NOT NULL AND next_attempt_at > :now GROUP BY account_id),
  candidates AS (
    SELECT id, account_id, next_attempt_at FROM webhook_subscriptions
    WHERE state = 'active' AND queued > 0 AND next_attempt_at <= :now
      AND account_id NOT IN (SELECT account_id FROM busy WHERE n >= :perAccount)
    ORDER BY next_attempt_at LIMIT :window),
  ranked AS (
    SELECT c.id, c.next_attempt_at,
      row_number() OVER (PARTITION BY c.account_id ORDER BY c.next_attempt_at, c.id) + coalesce(b.n, 0) AS share
    FROM candidates c LEFT JOIN busy b ON b.account_id = c.account_id)
  SELECT id FROM ranked WHERE share <= :perAccount ORDER BY share, next_attempt_at LIMIT :limit`

/** Webhook subscriptions and the outbox of deliveries, on the SQLite connection of the storage. */
export class SqliteWebhooks implements WebhookStore {
  readonly #db: Database
  readonly #writes: GroupCommit
  readonly #limits: StorageLimits
  readonly #busyTimeoutMs: number
  readonly #hasActive: Statement
  readonly #active: Statement
  readonly #insertDelivery: Statement
  readonly #countQueued: Statement
  readonly #anyReady: Statement
  readonly #choose: Statement
  readonly #lease: Statement
  readonly #head: Statement
  readonly #startHead: Statement
  readonly #emptied: Statement
  readonly #holds: Statement
  readonly #remove: Statement
  readonly #failedAttempt: Statement
  readonly #release: Statement
  readonly #recordAttempt: Statement
  readonly #disable: Statement
  readonly #settling: Statement
  readonly #settleTarget: Statement
  readonly #clearEarlier: Statement
  readonly #failSome: Statement
  readonly #unqueue: Statement

  constructor(db: Database, writes: GroupCommit, limits: StorageLimits, busyTimeoutMs: number) {
    this.#db = db
    this.#writes = writes
    this.#limits = limits
    this.#busyTimeoutMs = busyTimeoutMs
    this.#hasActive = db
      .prepare("SELECT 1 FROM webhook_subscriptions WHERE account_id = ? AND state = 'active' LIMIT 1")
      .pluck()
    this.#active = db.prepare(
      "SELECT id, queued, event_types FROM webhook_subscriptions WHERE account_id = ? AND state = 'active'",
    )
    this.#insertDelivery = db.prepare(
      `INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, traceparent, created_at,
         next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    )
    this.#countQueued = db.prepare('UPDATE webhook_subscriptions SET queued = queued + ? WHERE id = ?')
    this.#anyReady = db
      .prepare(
        `SELECT EXISTS (SELECT 1 FROM webhook_subscriptions
         WHERE state = 'active' AND queued > 0 AND next_attempt_at <= ?)`,
      )
      .pluck()
    this.#choose = db.prepare(CHOOSE).pluck()
    this.#lease = db.prepare('UPDATE webhook_subscriptions SET lease = ?, next_attempt_at = ? WHERE id = ?')
    this.#head = db.prepare(
      `SELECT d.id, d.event_id, d.event_type, d.body, d.traceparent, d.created_at, d.first_attempt_at, d.attempts,
         d.subscription_id,
         s.url, s.secret, s.failures, s.failing_since
       FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
       WHERE d.subscription_id = ? AND d.state = 'pending' ORDER BY d.id LIMIT 1`,
    )
    this.#startHead = db.prepare(
      'UPDATE webhook_deliveries SET first_attempt_at = coalesce(first_attempt_at, ?) WHERE id = ?',
    )
    // A count that says "queued" with nothing behind it would be claimed forever: set it right.
    this.#emptied = db.prepare('UPDATE webhook_subscriptions SET queued = 0, lease = NULL WHERE id = ?')
    this.#holds = db.prepare('SELECT 1 FROM webhook_subscriptions WHERE id = ? AND lease = ?').pluck()
    this.#remove = db.prepare("DELETE FROM webhook_deliveries WHERE id = ? RETURNING state = 'pending'").pluck()
    this.#failedAttempt = db.prepare(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = ?, last_error = ?
       WHERE id = ? AND state = 'pending'`,
    )
    // A success ends a run of failures; a failure extends it, the first one starting the give-up clock.
    this.#release = db
      .prepare(
        `UPDATE webhook_subscriptions SET lease = NULL, attempts_made = attempts_made + 1,
           failures = CASE WHEN :delivered THEN 0 WHEN :counted THEN failures + 1 ELSE failures END,
           failing_since = CASE WHEN :delivered THEN NULL WHEN :counted THEN coalesce(failing_since, :startedAt)
             ELSE failing_since END,
           next_attempt_at = :next, queued = queued - :dequeued
         WHERE id = :id RETURNING attempts_made`,
      )
      .pluck()
    this.#recordAttempt = db.prepare(
      `INSERT INTO webhook_attempts
         (subscription_id, slot, event_id, event_type, outcome, started_at, duration_ms, status, error)
       VALUES (:subscription, :slot, :eventId, :eventType, :outcome, :startedAt, :durationMs, :status, :error)
       ON CONFLICT (subscription_id, slot) DO UPDATE SET event_id = excluded.event_id,
         event_type = excluded.event_type, outcome = excluded.outcome, started_at = excluded.started_at,
         duration_ms = excluded.duration_ms, status = excluded.status, error = excluded.error`,
    )
    // Its queue is failed afterwards, a batch at a time (settle): `queued` counts what is left to fail. One disabled
    // already (while an attempt ran) keeps the reason and time it was disabled with.
    this.#disable = db.prepare(
      `UPDATE webhook_subscriptions SET state = 'disabled', disabled_reason = ?, disabled_at = ?, failures = 0,
         failing_since = NULL WHERE id = ? AND state = 'active'`,
    )
    this.#settling = db.prepare(
      `SELECT id, disabled_at, disabled_reason FROM webhook_subscriptions
       WHERE state = 'disabled' AND queued > 0 LIMIT 1`,
    )
    this.#settleTarget = db.prepare(
      "SELECT id, disabled_at, disabled_reason FROM webhook_subscriptions WHERE id = ? AND state = 'disabled'",
    )
    // Failed deliveries of an earlier disabling go, so a subscription keeps at most one disabling's worth.
    this.#clearEarlier = db.prepare(
      `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
         WHERE subscription_id = :id AND state = 'failed' AND failed_at < :disabledAt LIMIT :limit)`,
    )
    this.#failSome = db.prepare(
      `UPDATE webhook_deliveries SET state = 'failed', failed_at = :disabledAt, last_error = coalesce(last_error, :error)
       WHERE id IN (SELECT id FROM webhook_deliveries WHERE subscription_id = :id AND state = 'pending'
         ORDER BY id LIMIT :limit)`,
    )
    // What is left to fail, kept above zero until a batch finds nothing to do, so the subscription stays on the
    // settling index until every earlier failed delivery is gone too.
    this.#unqueue = db.prepare(
      `UPDATE webhook_subscriptions SET queued = CASE WHEN :cleared = 0 AND :failed = 0 THEN 0
         ELSE max(queued - :failed, 1) END WHERE id = :id`,
    )
  }

  /** True when the account has an active subscription, so its plant changes must queue events. */
  hasSubscriptions(accountId: number): boolean {
    return this.#hasActive.get(accountId) !== undefined
  }

  /**
   * Queues `event` for every active subscription of the account that wants its type; one at its cap is disabled
   * instead. Call inside the change's transaction.
   */
  queue(accountId: number, event: OutboxEvent): void {
    const now = Date.now()
    const cap = this.#limits.queuedPerSubscription
    const subscriptions = this.#active.all(accountId) as Array<{ id: string; queued: number; event_types: string }>
    for (const subscription of subscriptions) {
      if (!wants(subscription.event_types, event.type)) continue
      if (cap > 0 && subscription.queued >= cap) {
        this.#disable.run('backlog', now, subscription.id)
        continue
      }
      this.#insertDelivery.run(subscription.id, event.id, event.type, event.body, event.traceparent ?? null, now, now)
      this.#countQueued.run(1, subscription.id)
    }
  }

  /** Fails up to `limit` deliveries queued for a disabled subscription; see Storage.settleDisabled. */
  async settleDisabled(limit: number): Promise<number> {
    for (;;) {
      // A read first: with nothing to settle, no write lock.
      const target = guard(() => this.#settling.get()) as SettleTarget | undefined
      if (target === undefined) return 0
      const changed = await this.#writes.run(() => this.#db.transaction(() => this.#settleBatch(target, limit))())
      // Nothing changed: that subscription is settled and off the index now; another may still wait.
      if (changed > 0) return changed
    }
  }

  /** Fails everything a disabled subscription still holds, a batch per transaction; nothing when it is active. */
  async #settleAll(id: string): Promise<void> {
    for (;;) {
      const target = guard(() => this.#settleTarget.get(id)) as SettleTarget | undefined
      if (target === undefined) return
      const changed = await this.#writes.run(() =>
        this.#db.transaction(() => this.#settleBatch(target, SETTLE_BATCH))(),
      )
      if (changed === 0) return
    }
  }

  #settleBatch(target: SettleTarget, limit: number): number {
    const at = { id: target.id, disabledAt: target.disabled_at, limit }
    const cleared = this.#clearEarlier.run(at).changes
    const failed = this.#failSome.run({ ...at, error: GIVEN_UP[target.disabled_reason] }).changes
    this.#unqueue.run({ id: target.id, cleared, failed })
    return cleared + failed
  }

  async createSubscription(subscription: NewSubscription): Promise<Subscription> {
    const db = this.#db
    const max = this.#limits.subscriptionsPerAccount
    guard(() =>
      db
        .transaction(() => {
          const accountId = ensureAccount(db, subscription.accountName)
          const count = db.prepare('SELECT count(*) FROM webhook_subscriptions WHERE account_id = ?').pluck()
          if (max > 0 && (count.get(accountId) as number) >= max) throw new QuotaExceededError('subscriptions', max)
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

  async listSubscriptions(filter: SubscriptionFilter & { id?: string } = {}): Promise<Subscription[]> {
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
      db.prepare('DELETE FROM webhook_deliveries WHERE subscription_id = ?').run(id)
      db.prepare('DELETE FROM webhook_attempts WHERE subscription_id = ?').run(id)
      return true
    })
    return guard(() => remove.immediate())
  }

  async enableSubscription(id: string, accountId?: number): Promise<Subscription | undefined> {
    const [subscription] = await this.listSubscriptions({ id, accountId })
    if (subscription === undefined) return undefined
    // What it held before is failed first, so nothing from before the disabling is delivered after it.
    await this.#settleAll(id)
    const scoped = accountId === undefined ? '' : ' AND account_id = ?'
    const args = accountId === undefined ? [id] : [id, accountId]
    // Only a disabled one changes: enabling an active subscription must not reset its failures or backoff.
    const sql = `UPDATE webhook_subscriptions SET state = 'active', disabled_reason = NULL, disabled_at = NULL,
      failures = 0, failing_since = NULL, next_attempt_at = ? WHERE id = ?${scoped} AND state = 'disabled'`
    await this.#writes.run(() => this.#db.prepare(sql).run(Date.now(), ...args))
    return (await this.listSubscriptions({ id, accountId }))[0]
  }

  async claimDeliveries(limit: number, leaseMs: number, perAccount: number): Promise<ClaimedDelivery[]> {
    const now = Date.now()
    // A read first: an idle outbox costs no write lock.
    if (guard(() => this.#anyReady.get(now)) === 0) return []
    const lease = randomUUID()
    const claim = this.#db.transaction(() => {
      const ids = this.#choose.all({ now, perAccount, limit, window: claimWindow(limit) }) as string[]
      const rows: DeliveryRow[] = []
      for (const id of ids) {
        const head = this.#head.get(id) as DeliveryRow | undefined
        if (head === undefined) {
          this.#emptied.run(id)
          continue
        }
        this.#lease.run(lease, now + leaseMs, id)
        this.#startHead.run(now, head.id)
        rows.push({ ...head, first_attempt_at: head.first_attempt_at ?? now })
      }
      return rows
    })
    // A short wait for another process's lock: a claim is not worth holding the event loop for the busy timeout.
    const rows = briefly(this.#db, this.#busyTimeoutMs, () => guard(() => claim.immediate()))
    return rows.map((row) => toClaimedDelivery(row, lease))
  }

  finishDelivery(delivery: DeliveryRef, outcome: DeliveryOutcome): Promise<void> {
    const finish = this.#db.transaction(() => this.#finish(delivery, outcome))
    return this.#writes.run(() => finish())
  }

  #finish(delivery: DeliveryRef, outcome: DeliveryOutcome): void {
    // Another claim holds the subscription now (this one outlived its lease): its record is the one that counts.
    if (this.#holds.get(delivery.subscriptionId, delivery.lease) === undefined) return
    const now = Date.now()
    const id = Number(delivery.id)
    const delivered = outcome.state === 'delivered'
    // Delivered: the row goes; one fewer queued only if it still counted as queued (not failed by a disabling).
    const dequeued = delivered ? ((this.#remove.get(id) as number | undefined) ?? 0) : 0
    if (!delivered) this.#failedAttempt.run(outcome.status, outcome.error, id)
    const made = this.#release.get({
      delivered: delivered ? 1 : 0,
      // A deferred attempt leaves the subscription's run of failures as it was.
      counted: outcome.state === 'deferred' ? 0 : 1,
      startedAt: outcome.startedAt.getTime(),
      next: outcome.state === 'retry' || outcome.state === 'deferred' ? outcome.nextAttemptAt.getTime() : now,
      dequeued,
      id: delivery.subscriptionId,
    }) as number
    this.#record(delivery, outcome, made)
    if (outcome.state === 'failed') this.#disable.run('failing', now, delivery.subscriptionId)
  }

  #record(
    delivery: Pick<DeliveryRef, 'subscriptionId' | 'eventId' | 'eventType'>,
    outcome: DeliveryOutcome,
    made: number,
  ): void {
    this.#recordAttempt.run({
      subscription: delivery.subscriptionId,
      slot: made % ATTEMPTS_KEPT,
      eventId: delivery.eventId,
      eventType: delivery.eventType,
      outcome: outcome.state,
      startedAt: outcome.startedAt.getTime(),
      durationMs: Math.round(outcome.durationMs),
      status: outcome.status,
      error: outcome.error,
    })
  }

  purgeFailedDeliveries(before: Date, limit: number): Promise<number> {
    const sql = `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
      WHERE state = 'failed' AND failed_at < ? ORDER BY failed_at LIMIT ?)`
    return this.#writes.run(() => this.#db.prepare(sql).run(before.getTime(), limit).changes)
  }

  async deliveryHistory(subscriptionId: string, limit: number): Promise<DeliveryHistory> {
    const db = this.#db
    const attempts = guard(() =>
      db
        .prepare(
          `SELECT event_id, event_type, outcome, started_at, duration_ms, status, error FROM webhook_attempts
           WHERE subscription_id = ? ORDER BY started_at DESC, slot DESC`,
        )
        .all(subscriptionId),
    ) as Array<{
      event_id: string
      event_type: string
      outcome: DeliveryOutcome['state']
      started_at: number
      duration_ms: number
      status: number | null
      error: string | null
    }>
    const failed = guard(() =>
      db
        .prepare(
          `SELECT event_id, event_type, created_at, failed_at, attempts, last_status, last_error FROM webhook_deliveries
           WHERE subscription_id = ? AND state = 'failed' ORDER BY id DESC LIMIT ?`,
        )
        .all(subscriptionId, limit),
    ) as Array<{
      event_id: string
      event_type: string
      created_at: number
      failed_at: number
      attempts: number
      last_status: number | null
      last_error: string | null
    }>
    return {
      attempts: attempts.map((row) => ({
        eventId: row.event_id,
        eventType: row.event_type,
        outcome: row.outcome,
        startedAt: new Date(row.started_at),
        durationMs: row.duration_ms,
        status: row.status,
        error: row.error,
      })),
      failed: failed.map((row) => ({
        eventId: row.event_id,
        eventType: row.event_type,
        createdAt: new Date(row.created_at),
        failedAt: new Date(row.failed_at),
        attempts: row.attempts,
        lastStatus: row.last_status,
        lastError: row.last_error,
      })),
    }
  }

  async countPendingDeliveries(): Promise<number> {
    const sql = "SELECT coalesce(sum(queued), 0) FROM webhook_subscriptions WHERE state = 'active'"
    return guard(() => this.#db.prepare(sql).pluck().get()) as number
  }
}
