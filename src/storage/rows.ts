import type { ClaimedDelivery, StoredToken, Subscription, TokenEntry } from './types.js'

// Rows as both backends read them: SQLite gives times as epoch milliseconds and ids as numbers, PostgreSQL gives
// Dates and int8 as bigint.
type Time = number | Date
type Id = number | bigint

const dateOrNull = (time: Time | null): Date | null => (time === null ? null : new Date(time))

export interface TokenRow {
  id: string
  account_id: Id
  account_name: string
  secret_hash: Buffer
  scopes: string
  label: string | null
  created_at: Time
  expires_at: Time | null
  revoked_at: Time | null
  created_by: string | null
}

/** The columns a token is read with, `t` the token and `a` its account. */
export const TOKEN_COLUMNS = `t.id, t.account_id, a.name AS account_name, t.secret_hash, t.scopes, t.label,
  t.created_at, t.expires_at, t.revoked_at, t.created_by`

export function toToken(row: TokenRow): StoredToken {
  return {
    id: row.id,
    accountId: Number(row.account_id),
    accountName: row.account_name,
    secretHash: row.secret_hash,
    scopes: row.scopes.split(' ').filter(Boolean),
    label: row.label,
    createdAt: new Date(row.created_at),
    expiresAt: dateOrNull(row.expires_at),
    revokedAt: dateOrNull(row.revoked_at),
    createdBy: row.created_by,
  }
}

/** A token as an export carries it: its account by name. */
export function toTokenEntry(row: TokenRow): TokenEntry {
  const token = toToken(row)
  return {
    type: 'token',
    id: token.id,
    account: token.accountName,
    secretHash: token.secretHash,
    scopes: token.scopes,
    label: token.label,
    createdAt: token.createdAt,
    expiresAt: token.expiresAt,
    revokedAt: token.revokedAt,
    createdBy: token.createdBy,
  }
}

/** The record without its secret's hash, as listing and creating return it. */
export function withoutSecret(token: StoredToken): Omit<StoredToken, 'secretHash'> {
  const { secretHash: _hidden, ...record } = token
  return record
}

export interface SubscriptionRow {
  id: string
  account_id: Id
  account_name: string
  url: string
  event_types: string
  created_at: Time
  state: 'active' | 'disabled'
  disabled_reason: Subscription['disabledReason']
  disabled_at: Time | null
  queued: number
  failing_since: Time | null
}

export function toSubscription(row: SubscriptionRow): Subscription {
  return {
    id: row.id,
    accountId: Number(row.account_id),
    accountName: row.account_name,
    url: row.url,
    eventTypes: row.event_types.split(' '),
    createdAt: new Date(row.created_at),
    state: row.state,
    disabledReason: row.disabled_reason,
    disabledAt: dateOrNull(row.disabled_at),
    queued: row.queued,
    failingSince: dateOrNull(row.failing_since),
  }
}

/**
 * The columns a subscription is listed with, `s` the subscription and `a` its account. A disabled subscription has
 * nothing waiting to be made: what it still holds is being failed (settleDisabled).
 */
export const SUBSCRIPTION_COLUMNS = `s.id, s.account_id, a.name AS account_name, s.url, s.event_types, s.created_at,
  s.state, s.disabled_reason, s.disabled_at, CASE WHEN s.state = 'active' THEN s.queued ELSE 0 END AS queued,
  s.failing_since`

/** A claimed delivery: the columns of webhook_deliveries and its subscription's. */
export interface DeliveryRow {
  id: Id | string
  event_id: string
  event_type: string
  body: string
  traceparent: string | null
  created_at: Time
  first_attempt_at: Time
  attempts: number
  subscription_id: string
  url: string
  secret: string
  failures: number
  failing_since: Time | null
}

/** The claimed delivery a row describes, under `lease`. */
export function toClaimedDelivery(row: DeliveryRow, lease: string): ClaimedDelivery {
  return {
    id: String(row.id),
    lease,
    eventId: row.event_id,
    traceparent: row.traceparent,
    eventType: row.event_type,
    body: row.body,
    url: row.url,
    secret: row.secret,
    subscriptionId: row.subscription_id,
    attempts: row.attempts,
    createdAt: new Date(row.created_at),
    firstAttemptAt: new Date(row.first_attempt_at),
    failures: row.failures,
    failingSince: dateOrNull(row.failing_since),
  }
}
