import type { Redis } from 'ioredis'

/** Counts failed authentications per client address within a fixed window. */
export interface FailureCounter {
  /** Failures from `address` in the current window. */
  count(address: string): Promise<number>
  /** Records one failure; resolves with the count including it and the ms until the window resets. */
  hit(address: string): Promise<{ count: number; resetMs: number }>
}

/** In one process: a map of windows, pruned as it grows. */
export function memoryFailureCounter(windowMs: number, maxEntries = 100_000): FailureCounter {
  const windows = new Map<string, { count: number; resetAt: number }>()
  const current = (address: string) => {
    const entry = windows.get(address)
    return entry !== undefined && entry.resetAt > Date.now() ? entry : undefined
  }
  return {
    async count(address) {
      return current(address)?.count ?? 0
    },
    async hit(address) {
      const now = Date.now()
      const entry = current(address) ?? { count: 0, resetAt: now + windowMs }
      entry.count++
      windows.delete(address)
      windows.set(address, entry)
      if (windows.size > maxEntries) windows.delete(windows.keys().next().value!)
      return { count: entry.count, resetMs: entry.resetAt - now }
    },
  }
}

/** Shared by every instance through Redis: INCR with an expiry set by the window's first failure. */
export function redisFailureCounter(redis: Redis, windowMs: number, prefix: string): FailureCounter {
  return {
    async count(address) {
      return Number((await redis.get(prefix + address)) ?? 0)
    },
    async hit(address) {
      const key = prefix + address
      const results = (await redis.multi().incr(key).pexpire(key, windowMs, 'NX').pttl(key).exec()) ?? []
      const count = Number(results[0]?.[1] ?? 1)
      const ttl = Number(results[2]?.[1] ?? -1)
      return { count, resetMs: ttl > 0 ? ttl : windowMs }
    },
  }
}
