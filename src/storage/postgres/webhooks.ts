import { randomUUID } from 'node:crypto'
import type postgres from 'postgres'
import {
  ATTEMPTS_KEPT,
  QuotaExceededError,
  SETTLE_BATCH,
  type AttemptRecord,
  type ClaimedDelivery,
  type DeliveryHistory,
  type DeliveryOutcome,
  type DeliveryRef,
  type FailedDelivery,
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
import { claimWindow, GIVEN_UP } from '../webhook-rules.js'
import type { Query, Sql } from './client.js'
import { guard } from './errors.js'

/**
 * The part of a plant change's statement that queues its event, for each row the change's CTE `changed` returned:
 * one delivery per active subscription of the account that wants its type, its queue count raised. A subscription
 * already holding `cap` queued deliveries (cap 0: no cap) is disabled instead; its queue is failed afterwards, a
 * batch at a time (settleDisabled). One statement, so the change and its event commit together; the subscriptions
 * are locked in id order, so concurrent changes of one account cannot deadlock.
 *
 * The two conditions that need no row (the account's count of subscriptions, and `subs` not being empty) let
 * PostgreSQL skip reading webhook_subscriptions for an account that has none. Without them, every change scanned it:
 * the plan cached while the table was small is a sequential scan, and another account's deliveries leave dead row
 * versions there faster than autovacuum removes them (with a 500,000-delivery backlog, POSTs of an account without
 * subscriptions ran at 0.63 of their rate without the backlog). An account with subscriptions still reads the table.
 *
 * Text, with the account's id as the parameter `account` and its own six numbered from `$at` (queueEventValues
 * gives them), so that a change's statement is one constant string: built from fragments, postgres.js assembled it
 * again on every call, 30 µs of a POST.
 */
export function queueEventText(account: string, at: number): string {
  const [cap, needle, id, type, body, trace] = [0, 1, 2, 3, 4, 5].map((i) => `$${at + i}`)
  return `subs AS (
      SELECT s.id, (${cap}::int > 0 AND s.queued >= ${cap}::int) AS at_cap FROM webhook_subscriptions s
      WHERE s.account_id = ${account} AND s.state = 'active'
        AND position(${needle}::text IN ' ' || s.event_types || ' ') > 0 AND EXISTS (SELECT 1 FROM changed)
        AND (SELECT subscriptions > 0 FROM accounts WHERE id = ${account})
      ORDER BY s.id FOR UPDATE),
    queued AS (
      INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, body, traceparent, created_at,
        next_attempt_at)
      SELECT id, ${id}, ${type}, ${body}, ${trace}::text, now(), now() FROM subs WHERE NOT at_cap),
    requeued AS (
      UPDATE webhook_subscriptions s SET queued = CASE WHEN subs.at_cap THEN s.queued ELSE s.queued + 1 END,
        state = CASE WHEN subs.at_cap THEN 'disabled' ELSE s.state END,
        disabled_reason = CASE WHEN subs.at_cap THEN 'backlog' ELSE s.disabled_reason END,
        disabled_at = CASE WHEN subs.at_cap THEN now() ELSE s.disabled_at END,
        failures = CASE WHEN subs.at_cap THEN 0 ELSE s.failures END,
        failing_since = CASE WHEN subs.at_cap THEN NULL ELSE s.failing_since END
      FROM subs WHERE s.id = subs.id AND EXISTS (SELECT 1 FROM subs))`
}

/** The values of queueEventText's six parameters, in its order. */
export const queueEventValues = (event: OutboxEvent, cap: number) =>
  [cap, ` ${event.type} `, event.id, event.type, event.body, event.traceparent ?? null] as const

/**
 * One batch of settling (see Storage.settleDisabled) for the disabled subscription `target` selects and locks: up to
 * `limit` failed deliveries of an earlier disabling deleted and up to `limit` queued ones failed. Its queue count is
 * what is left to fail, kept above zero until a batch finds nothing to do, so it stays on the settling index until
 * then. Resolves with the rows changed, and whether `target` found a subscription.
 */
async function settleBatch(
  sql: Query,
  target: postgres.Fragment,
  limit: number,
): Promise<{ found: boolean; changed: number }> {
  // The rows are chosen by the subscription's id as a value (`(SELECT id FROM target)`), not by a join on `target`:
  // correlated with the locked row, PostgreSQL re-ran the limited subquery for every row of the subscription, 6 s per
  // batch at a queue of 10,000. `state = 'pending'` is repeated on the row updated, so that a row failed by another
  // settler while this statement waited for the lock is neither failed nor counted twice.
  const [row] = await sql<{ found: boolean; changed: number }[]>`WITH target AS (${target}),
    earlier AS (
      SELECT id FROM webhook_deliveries WHERE subscription_id = (SELECT id FROM target) AND state = 'failed'
        AND failed_at < (SELECT disabled_at FROM target) LIMIT ${limit}),
    cleared AS (DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM earlier) RETURNING 1),
    waiting AS (
      SELECT id FROM webhook_deliveries WHERE subscription_id = (SELECT id FROM target) AND state = 'pending'
        ORDER BY id LIMIT ${limit}),
    failed AS (
      UPDATE webhook_deliveries d SET state = 'failed', failed_at = t.disabled_at,
        last_error = coalesce(d.last_error, CASE t.disabled_reason WHEN 'backlog' THEN ${GIVEN_UP.backlog}
          ELSE ${GIVEN_UP.failing} END)
      FROM target t WHERE d.id IN (SELECT id FROM waiting) AND d.state = 'pending'
      RETURNING 1),
    changed AS (SELECT (SELECT count(*) FROM cleared) AS cleared, (SELECT count(*) FROM failed) AS failed),
    unqueued AS (
      UPDATE webhook_subscriptions s SET queued = CASE WHEN c.cleared = 0 AND c.failed = 0 THEN 0
        ELSE greatest(s.queued - c.failed, 1) END
      FROM target t, changed c WHERE s.id = t.id)
    SELECT (cleared + failed)::int AS changed, EXISTS (SELECT 1 FROM target) AS found FROM changed`
  return row!
}

type ClaimRow = DeliveryRow & { leased_id: string }

/**
 * Webhook subscriptions and the outbox of deliveries: what requests do on the storage's pool, what the dispatcher does
 * (claims, outcomes, settling, purging, counting) on `delivery`, its own (DELIVERY_POOL_SIZE in types.ts).
 */
export class PostgresWebhooks implements WebhookStore {
  readonly #sql: Sql
  readonly #delivery: Sql
  readonly #limits: StorageLimits

  constructor(sql: Sql, delivery: Sql, limits: StorageLimits) {
    this.#sql = sql
    this.#delivery = delivery
    this.#limits = limits
  }

  async createSubscription(subscription: NewSubscription): Promise<Subscription> {
    const sql = this.#sql
    const max = this.#limits.subscriptionsPerAccount
    // The account's count of subscriptions goes up only while under the quota: ON CONFLICT's WHERE is checked on the
    // row as committed, once its lock is had, so creates racing at the quota cannot pass it, on any instance.
    const [created] = await guard(
      () => sql<{ id: string }[]>`WITH account AS (
          INSERT INTO accounts (name, created_at, subscriptions) VALUES (${subscription.accountName}, now(), 1)
          ON CONFLICT (name) DO UPDATE SET subscriptions = accounts.subscriptions + 1
            WHERE ${max}::int = 0 OR accounts.subscriptions < ${max}::int
          RETURNING id)
        INSERT INTO webhook_subscriptions (id, account_id, url, secret, event_types, created_at)
        SELECT ${subscription.id}, id, ${subscription.url}, ${subscription.secret},
          ${subscription.eventTypes.join(' ')}, now() FROM account RETURNING id`,
    )
    if (created === undefined) throw new QuotaExceededError('subscriptions', max)
    return (await this.listSubscriptions({ id: subscription.id }))[0]!
  }

  async listSubscriptions(filter: SubscriptionFilter & { id?: string } = {}): Promise<Subscription[]> {
    const sql = this.#sql
    const byId = filter.id === undefined ? sql`` : sql`AND s.id = ${filter.id}`
    const byAccount = filter.accountId === undefined ? sql`` : sql`AND s.account_id = ${filter.accountId}`
    const byName = filter.accountName === undefined ? sql`` : sql`AND a.name = ${filter.accountName}`
    const rows = await guard(
      () => sql<SubscriptionRow[]>`SELECT ${sql.unsafe(SUBSCRIPTION_COLUMNS)}
        FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id
        WHERE true ${byId} ${byAccount} ${byName} ORDER BY s.created_at, s.id`,
    )
    return rows.map(toSubscription)
  }

  async deleteSubscription(id: string, accountId?: number): Promise<boolean> {
    const sql = this.#sql
    const scoped = accountId === undefined ? sql`` : sql`AND account_id = ${accountId}`
    const [removed] = await guard(
      () => sql<{ n: number }[]>`WITH removed AS (
          DELETE FROM webhook_subscriptions WHERE id = ${id} ${scoped} RETURNING account_id),
        counted AS (UPDATE accounts SET subscriptions = subscriptions - 1 WHERE id IN (SELECT account_id FROM removed))
        SELECT count(*)::int AS n FROM removed`,
    )
    if (removed!.n === 0) return false
    // A second statement, so that it sees what a plant change queued for the subscription before the delete above
    // could take its row; none can be queued after. A crash in between leaves rows that no claim reads.
    await guard(
      () => sql`WITH deliveries AS (DELETE FROM webhook_deliveries WHERE subscription_id = ${id})
        DELETE FROM webhook_attempts WHERE subscription_id = ${id}`,
    )
    return true
  }

  async enableSubscription(id: string, accountId?: number): Promise<Subscription | undefined> {
    const sql = this.#sql
    const scoped = accountId === undefined ? sql`` : sql`AND account_id = ${accountId}`
    // What it held before is failed first, so nothing from before the disabling is delivered after it.
    const target = sql`SELECT id, disabled_at, disabled_reason FROM webhook_subscriptions
      WHERE id = ${id} ${scoped} AND state = 'disabled' FOR UPDATE`
    while ((await guard(() => settleBatch(sql, target, SETTLE_BATCH))).changed > 0);
    // Only a disabled one changes: enabling an active subscription must not reset its failures or backoff.
    await guard(
      () => sql`UPDATE webhook_subscriptions SET state = 'active', disabled_reason = NULL, disabled_at = NULL,
        failures = 0, failing_since = NULL, next_attempt_at = now() WHERE id = ${id} ${scoped} AND state = 'disabled'`,
    )
    return (await this.listSubscriptions({ id, accountId }))[0]
  }

  async claimDeliveries(limit: number, leaseMs: number, perAccount: number): Promise<ClaimedDelivery[]> {
    const sql = this.#delivery
    const lease = randomUUID()
    // SKIP LOCKED: two dispatchers never lease the same subscription, and a claim never waits on a plant change
    // queueing an event. The choice is the SQLite backend's (see CHOOSE there): ready subscriptions in due order
    // off the partial index, accounts at their lease cap skipped, accounts holding fewer leases first.
    const rows = await guard(
      () => sql<ClaimRow[]>`WITH busy AS (
          SELECT account_id, count(*) AS n FROM webhook_subscriptions
          WHERE lease IS NOT NULL AND next_attempt_at > now() GROUP BY account_id),
        candidates AS (
          SELECT id, account_id, next_attempt_at FROM webhook_subscriptions
          WHERE state = 'active' AND queued > 0 AND next_attempt_at <= now()
            AND account_id NOT IN (SELECT account_id FROM busy WHERE n >= ${perAccount})
          ORDER BY next_attempt_at LIMIT ${claimWindow(limit)} FOR UPDATE SKIP LOCKED),
        ranked AS (
          SELECT c.id, c.next_attempt_at,
            row_number() OVER (PARTITION BY c.account_id ORDER BY c.next_attempt_at, c.id) + coalesce(b.n, 0) AS share
          FROM candidates c LEFT JOIN busy b ON b.account_id = c.account_id),
        chosen AS (SELECT id FROM ranked WHERE share <= ${perAccount} ORDER BY share, next_attempt_at LIMIT ${limit}),
        leased AS (
          UPDATE webhook_subscriptions s SET lease = ${lease},
            next_attempt_at = now() + ${leaseMs} * interval '1 millisecond'
          FROM chosen WHERE s.id = chosen.id RETURNING s.id, s.url, s.secret, s.failures, s.failing_since),
        heads AS (
          UPDATE webhook_deliveries d SET first_attempt_at = coalesce(d.first_attempt_at, now())
          FROM leased CROSS JOIN LATERAL (SELECT o.id FROM webhook_deliveries o
            WHERE o.subscription_id = leased.id AND o.state = 'pending' ORDER BY o.id LIMIT 1) h
          WHERE d.id = h.id
          RETURNING d.id::text AS id, d.event_id, d.event_type, d.body, d.traceparent, d.created_at, d.first_attempt_at,
            d.attempts, d.subscription_id)
        SELECT heads.*, leased.id AS leased_id, leased.url, leased.secret, leased.failures, leased.failing_since
        FROM leased LEFT JOIN heads ON heads.subscription_id = leased.id`,
    )
    const empty = rows.filter((row) => row.id === null).map((row) => row.leased_id)
    // A count that says "queued" with nothing behind it would be claimed forever: set it right.
    if (empty.length > 0) {
      await guard(() => sql`UPDATE webhook_subscriptions SET queued = 0, lease = NULL WHERE id IN ${sql(empty)}`)
    }
    return rows.filter((row) => row.id !== null).map((row) => toClaimedDelivery(row, lease))
  }

  async finishDelivery(delivery: DeliveryRef, outcome: DeliveryOutcome): Promise<void> {
    const sql = this.#delivery
    const subscription = delivery.subscriptionId
    const id = BigInt(delivery.id)
    const delivered = outcome.state === 'delivered'
    // Given up on: disabled, unless something disabled it while the attempt ran (its reason and time then stand).
    const givenUp = outcome.state === 'failed'
    const next = outcome.state === 'retry' || outcome.state === 'deferred' ? outcome.nextAttemptAt : new Date()
    // A deferred attempt leaves the subscription's run of failures as it was.
    const counted = outcome.state !== 'deferred'
    // One statement. `held` locks the subscription first, as a plant change queueing an event does, so the two never
    // deadlock; nothing changes when another claim holds it now (this one outlived its lease: its record counts).
    // Delivered: the row goes, and one fewer is queued only if it still counted as queued (not failed by settling).
    await guard(
      () => sql`WITH held AS (
          SELECT id FROM webhook_subscriptions WHERE id = ${subscription} AND lease = ${delivery.lease} FOR UPDATE),
        gone AS (
          DELETE FROM webhook_deliveries WHERE ${delivered} AND id = ${id} AND EXISTS (SELECT 1 FROM held)
          RETURNING state),
        tried AS (
          UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = ${outcome.status},
            last_error = ${outcome.error}
          WHERE NOT ${delivered} AND id = ${id} AND state = 'pending' AND EXISTS (SELECT 1 FROM held)),
        released AS (
          UPDATE webhook_subscriptions s SET lease = NULL, attempts_made = s.attempts_made + 1,
            failures = CASE WHEN ${delivered} OR ${givenUp} THEN 0 WHEN ${counted} THEN s.failures + 1
              ELSE s.failures END,
            failing_since = CASE WHEN ${delivered} OR ${givenUp} THEN NULL
              WHEN ${counted} THEN coalesce(s.failing_since, ${outcome.startedAt}) ELSE s.failing_since END,
            next_attempt_at = ${next},
            queued = s.queued - (SELECT count(*) FROM gone WHERE state = 'pending'),
            disabled_reason = CASE WHEN ${givenUp} AND s.state = 'active' THEN 'failing' ELSE s.disabled_reason END,
            disabled_at = CASE WHEN ${givenUp} AND s.state = 'active' THEN now() ELSE s.disabled_at END,
            state = CASE WHEN ${givenUp} THEN 'disabled' ELSE s.state END
          FROM held WHERE s.id = held.id RETURNING s.attempts_made)
        INSERT INTO webhook_attempts
          (subscription_id, slot, event_id, event_type, outcome, started_at, duration_ms, status, error)
        SELECT ${subscription}, attempts_made % ${ATTEMPTS_KEPT}, ${delivery.eventId}, ${delivery.eventType},
          ${outcome.state}, ${outcome.startedAt}, ${Math.round(outcome.durationMs)}, ${outcome.status}, ${outcome.error}
        FROM released
        ON CONFLICT (subscription_id, slot) DO UPDATE SET event_id = excluded.event_id,
          event_type = excluded.event_type, outcome = excluded.outcome, started_at = excluded.started_at,
          duration_ms = excluded.duration_ms, status = excluded.status, error = excluded.error`,
    )
  }

  async settleDisabled(limit: number): Promise<number> {
    const sql = this.#delivery
    // SKIP LOCKED: instances settling at once take different subscriptions.
    const target = sql`SELECT id, disabled_at, disabled_reason FROM webhook_subscriptions
      WHERE state = 'disabled' AND queued > 0 LIMIT 1 FOR UPDATE SKIP LOCKED`
    for (;;) {
      const { found, changed } = await guard(() => settleBatch(sql, target, limit))
      // Nothing changed: that subscription is settled and off the index now; another may still wait.
      if (!found || changed > 0) return changed
    }
  }

  async purgeFailedDeliveries(before: Date, limit: number): Promise<number> {
    const sql = this.#delivery
    const result = await guard(
      () => sql`DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
        WHERE state = 'failed' AND failed_at < ${before} ORDER BY failed_at LIMIT ${limit})`,
    )
    return result.count
  }

  async deliveryHistory(subscriptionId: string, limit: number): Promise<DeliveryHistory> {
    const sql = this.#sql
    const attempts = await guard(
      () => sql<AttemptRecord[]>`SELECT event_id AS "eventId", event_type AS "eventType", outcome,
          started_at AS "startedAt", duration_ms AS "durationMs", status, error
        FROM webhook_attempts WHERE subscription_id = ${subscriptionId} ORDER BY started_at DESC, slot DESC`,
    )
    const failed = await guard(
      () => sql<FailedDelivery[]>`SELECT event_id AS "eventId", event_type AS "eventType", created_at AS "createdAt",
          failed_at AS "failedAt", attempts, last_status AS "lastStatus", last_error AS "lastError"
        FROM webhook_deliveries WHERE subscription_id = ${subscriptionId} AND state = 'failed'
        ORDER BY id DESC LIMIT ${limit}`,
    )
    return { attempts: [...attempts], failed: [...failed] }
  }

  async countPendingDeliveries(): Promise<number> {
    const sql = this.#delivery
    const [row] = await guard(
      () => sql<{ n: bigint }[]>`SELECT coalesce(sum(queued), 0)::bigint AS n FROM webhook_subscriptions
        WHERE state = 'active'`,
    )
    return Number(row!.n)
  }
}
