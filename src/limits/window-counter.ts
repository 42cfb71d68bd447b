import type { Redis } from 'ioredis'

/** Hits on one key in its current window, and the ms until that window ends. */
export interface Window {
  count: number
  resetMs: number
}

/**
 * Counts hits per key in fixed windows: requests per token or account, failed authentications per client address.
 * The one store contract of every rate limit, kept in this process or shared through Redis.
 */
export interface WindowCounter {
  /** The key's current window (count 0 when none); at once when the counter is in this process. */
  count(key: string): Window | Promise<Window>
  /** Records one hit; the window including it, at once when the counter is in this process. */
  hit(key: string): Window | Promise<Window>
}

/** In one process: a map of windows, oldest evicted first beyond `maxEntries`. */
export function memoryWindowCounter(windowMs: number, maxEntries = 100_000): WindowCounter {
  const windows = new Map<string, { count: number; resetAt: number }>()
  const current = (key: string, now: number) => {
    const entry = windows.get(key)
    return entry !== undefined && entry.resetAt > now ? entry : undefined
  }
  return {
    count(key) {
      const now = Date.now()
      const entry = current(key, now)
      return { count: entry?.count ?? 0, resetMs: entry === undefined ? 0 : entry.resetAt - now }
    },
    hit(key) {
      const now = Date.now()
      const entry = current(key, now) ?? { count: 0, resetAt: now + windowMs }
      entry.count++
      // Moved to the end at every hit: the key evicted first is the one left alone longest, never one being hit.
      windows.delete(key)
      windows.set(key, entry)
      if (windows.size > maxEntries) windows.delete(windows.keys().next().value!)
      return { count: entry.count, resetMs: entry.resetAt - now }
    },
  }
}

/** The values of a MULTI, throwing the first error any command in it met. */
function values(results: Array<[Error | null, unknown]> | null): unknown[] {
  if (results === null) throw new Error('redis transaction aborted')
  const failed = results.find(([err]) => err !== null)
  if (failed) throw failed[0]
  return results.map(([, value]) => value)
}

/**
 * Shared by every instance through Redis. The window starts with `SET NX PX` in the same MULTI as the INCR,
 * so a key never lives without its expiry (and this runs on any Redis since 2.6.12).
 */
export function redisWindowCounter(redis: Redis, windowMs: number, prefix: string): WindowCounter {
  const window = (count: unknown, ttl: unknown): Window => ({
    count: Number(count ?? 0),
    resetMs: Number(ttl) > 0 ? Number(ttl) : windowMs,
  })
  return {
    async count(key) {
      const name = prefix + key
      const [count, ttl] = values(await redis.multi().get(name).pttl(name).exec())
      return count === null ? { count: 0, resetMs: 0 } : window(count, ttl)
    },
    async hit(key) {
      const name = prefix + key
      const [, count, ttl] = values(await redis.multi().set(name, 0, 'PX', windowMs, 'NX').incr(name).pttl(name).exec())
      return window(count, ttl)
    },
  }
}
