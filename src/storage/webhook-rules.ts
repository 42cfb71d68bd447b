import type { DisabledReason } from './types.js'

/** True when a subscription's `event_types` column (space-separated) includes `type`. */
export function wants(eventTypes: string, type: string): boolean {
  return eventTypes.split(' ').includes(type)
}

/** The error a queued delivery is failed with when its subscription is disabled for `reason`. */
export const GIVEN_UP: Record<DisabledReason, string> = {
  failing: 'subscription disabled: its attempts failed for the whole give-up period',
  backlog: 'subscription disabled: its queue reached its cap',
}

/**
 * How many ready subscriptions a claim of `limit` looks at: enough that accounts skipped for fairness still leave
 * `limit` to take, few enough that a claim's work stays bounded.
 */
export function claimWindow(limit: number): number {
  return 8 * limit + 32
}
