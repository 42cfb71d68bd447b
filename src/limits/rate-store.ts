import type { Redis } from 'ioredis'
import type { Rate } from './rate.js'

/** One key's budget as a request left it: whether it went through, the units left, when the next one comes. */
export interface Budget {
  allowed: boolean
  /** Whole units left after this request. */
  remaining: number
  /** Until one more unit is available: for a refused request, until it may be sent again. */
  nextMs: number
}

/**
 * A budget per key that refills continuously (GCRA, the token bucket kept as one timestamp): a rate of q per w
 * holds at most q units, one refilled every w/q, so a client sending at the sustained rate is never refused and a
 * burst may spend the whole budget at once. The one store contract of every rate limit, kept in this process or
 * shared through Redis; with the store in this process, every answer comes at once.
 */
export interface RateStore {
  /** Takes one unit of `key`'s budget if there is one; the budget as it leaves it. */
  take(key: string): Budget | Promise<Budget>
  /** The budget as a take would leave it, taking nothing: whether a request would go through now. */
  peek(key: string): Budget | Promise<Budget>
}

/**
 * Sums of a fractional interval (1000/7 ms) drift in their last bits: this much slack (a microsecond at most, a
 * thousandth of a shorter interval) keeps a burst of the whole budget at one instant from losing its last request
 * to rounding, and lets nothing through measurably early.
 */
const slackMs = (rate: Rate) => 1e-3 * Math.min(rate.windowMs / rate.max, 1)

/** Whether a request that leaves this debt (ms of refill owed) may go: at most the whole budget is owed. */
const within = (rate: Rate, debtMs: number) => debtMs <= rate.windowMs + slackMs(rate)

/**
 * At least a millisecond, to the microsecond: a clock reading and an interval summed across a power of two leave
 * noise in the last bits (60000.00000000001), which a wait in whole seconds, rounded up, would make a second longer.
 */
const waitMs = (ms: number) => Math.max(1, Math.round(ms * 1000) / 1000)

/**
 * The budget from the debt a key holds after a request, in ms of refill (the store keeps now + debt): a request is
 * let through while the debt it leaves is at most the capacity.
 */
export function budgetOf(rate: Rate, allowed: boolean, debtMs: number): Budget {
  const interval = rate.windowMs / rate.max
  if (!allowed) return { allowed, remaining: 0, nextMs: waitMs(debtMs - rate.windowMs) }
  const owed = Math.max(1, Math.ceil((debtMs - slackMs(rate)) / interval))
  return { allowed, remaining: Math.max(0, rate.max - owed), nextMs: waitMs(debtMs - (owed - 1) * interval) }
}

/** A RateStore whose answers come at once. */
export interface LocalRateStore extends RateStore {
  take(key: string): Budget
  peek(key: string): Budget
}

/**
 * In one process: each key's theoretical arrival time, oldest evicted first beyond `maxEntries`. On the monotonic
 * clock, whose small values keep the sums exact enough (epoch milliseconds would round a 0.1 ms interval away), and
 * which never steps back.
 */
export function memoryRateStore(
  rate: Rate,
  maxEntries = 100_000,
  now: () => number = () => performance.now(),
): LocalRateStore {
  const due = new Map<string, number>()
  const interval = rate.windowMs / rate.max
  const attempt = (key: string, taking: boolean): Budget => {
    const at = now()
    const from = Math.max(due.get(key) ?? at, at)
    const debt = from + interval - at
    if (!within(rate, debt)) return budgetOf(rate, false, debt)
    if (taking) {
      // Moved to the end at every take: the key evicted first is the one left alone longest.
      due.delete(key)
      due.set(key, from + interval)
      if (due.size > maxEntries) due.delete(due.keys().next().value!)
    }
    return budgetOf(rate, true, debt)
  }
  return { take: (key) => attempt(key, true), peek: (key) => attempt(key, false) }
}

// KEYS[1]: the key; ARGV: the refill interval, the capacity and the slack in ms, 1 to take. Redis's clock, so that
// instances whose clocks differ share one budget; in microseconds since 2023-11-14 (small enough that a sum keeps a
// fraction of a microsecond), written with all 17 digits (tostring keeps 14). A due time beyond a full budget means
// the clock stepped back: it is brought within one. Replies [allowed, debt in ms] (text: Lua's numbers are floats,
// which Redis would cut to integers).
const GCRA = `
local time = redis.call('TIME')
local now = (tonumber(time[1]) - 1700000000) * 1000000 + tonumber(time[2])
local interval = tonumber(ARGV[1]) * 1000
local capacity = tonumber(ARGV[2]) * 1000
local due = tonumber(redis.call('GET', KEYS[1]) or now)
if due < now then due = now end
if due > now + capacity then due = now + capacity end
local debt = due + interval - now
if debt > capacity + tonumber(ARGV[3]) * 1000 then return {0, string.format('%.17g', debt / 1000)} end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[1], string.format('%.17g', due + interval), 'PX', math.ceil(debt / 1000))
end
return {1, string.format('%.17g', debt / 1000)}
`

interface WithGcra {
  plantstoreGcra(key: string, interval: number, capacity: number, slack: number, take: 0 | 1): Promise<[number, string]>
}

/** Shared by every instance through Redis, one script run per request (EVALSHA, the script sent once). */
export function redisRateStore(redis: Redis, rate: Rate, prefix: string): RateStore {
  const client = redis as Redis & Partial<WithGcra>
  if (client.plantstoreGcra === undefined) redis.defineCommand('plantstoreGcra', { numberOfKeys: 1, lua: GCRA })
  const gcra = client as Redis & WithGcra
  const interval = rate.windowMs / rate.max
  const attempt = async (key: string, take: 0 | 1): Promise<Budget> => {
    const [allowed, debt] = await gcra.plantstoreGcra(prefix + key, interval, rate.windowMs, slackMs(rate), take)
    return budgetOf(rate, allowed === 1, Number(debt))
  }
  return { take: (key) => attempt(key, 1), peek: (key) => attempt(key, 0) }
}
