import type { PolicyBudget, PolicyName } from './rate-limits.js'
import type { Rate } from './rate.js'
import { waitSeconds } from './too-many.js'

/**
 * The `RateLimit-Policy` field (draft-ietf-httpapi-ratelimit-headers-11) for the policies in force: each one's quota
 * `q` and window `w` in seconds, `"token";q=600;w=60, "account";q=6000;w=60`. The same on every answer.
 */
export function policyField(policies: ReadonlyArray<{ policy: PolicyName; rate: Rate }>): string {
  return policies.map(({ policy, rate }) => `"${policy}";q=${rate.max};w=${rate.windowMs / 1000}`).join(', ')
}

/**
 * The `RateLimit` field: what the request left of each policy (`r`), and `t`, the seconds until the next unit is
 * refilled, rounded up to a whole second (at least 1), so that no more than `r` may be used within them: a client
 * that waits `t` when `r` is 0 is not refused. `"token";r=598;t=1`. A policy whose store is away says its whole quota,
 * as the request went through unlimited.
 */
export function limitField(budgets: readonly PolicyBudget[]): string {
  return budgets
    .map(({ policy, rate, budget }) =>
      budget === undefined
        ? `"${policy}";r=${rate.max}`
        : `"${policy}";r=${budget.remaining};t=${waitSeconds(budget.nextMs)}`,
    )
    .join(', ')
}
