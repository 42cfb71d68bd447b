import type { EventType } from '../webhooks/events.js'
import type { ClaimedDelivery } from './types.js'

/** A claimed delivery as both backends read it: the columns of webhook_deliveries and its subscription's. */
export interface DeliveryRow {
  id: number | string
  event_id: string
  event_type: EventType
  body: string
  created_at: number | Date
  first_attempt_at: number | Date
  attempts: number
  subscription_id: string
  url: string
  secret: string
  failures: number
  failing_since: number | Date | null
}

/** The claimed delivery a row describes, under `lease`. */
export function toClaimedDelivery(row: DeliveryRow, lease: string): ClaimedDelivery {
  return {
    id: String(row.id),
    lease,
    eventId: row.event_id,
    eventType: row.event_type,
    body: row.body,
    url: row.url,
    secret: row.secret,
    subscriptionId: row.subscription_id,
    attempts: row.attempts,
    createdAt: new Date(row.created_at),
    firstAttemptAt: new Date(row.first_attempt_at),
    failures: row.failures,
    failingSince: row.failing_since === null ? null : new Date(row.failing_since),
  }
}
