import type { Redis } from 'ioredis'

/** Failures from one address in its current window, and the ms until that window ends. */
export interface FailureWindow {
  count: number
  resetMs: number
}

/** Counts failed authentications per client address within a fixed window. */
export interface FailureCounter {
  /** The address's current window (count 0 when none); at once when the counter is in this process. */
  count(address: string): FailureWindow | Promise<FailureWindow>
  /** Records one failure; resolves with the window including it. */
  hit(address: string): Promise<FailureWindow>
}

/** In one process: a map of windows, oldest evicted first beyond `maxEntries`. */
export function memoryFailureCounter(windowMs: number, maxEntries = 100_000): FailureCounter {
  const windows = new Map<string, { count: number; resetAt: number }>()
  const current = (address: string) => {
    const entry = windows.get(address)
    return entry !== undefined && entry.resetAt > Date.now() ? entry : undefined
  }
  return {
    count(address) {
      const entry = current(address)
      return { count: entry?.count ?? 0, resetMs: entry === undefined ? 0 : entry.resetAt - Date.now() }
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
export function redisFailureCounter(redis: Redis, windowMs: number, prefix: string): FailureCounter {
  const window = (count: unknown, ttl: unknown): FailureWindow => ({
    count: Number(count ?? 0),
    resetMs: Number(ttl) > 0 ? Number(ttl) : windowMs,
  })
  return {
    async count(address) {
      const key = prefix + address
      const [count, ttl] = values(await redis.multi().get(key).pttl(key).exec())
      return count === null ? { count: 0, resetMs: 0 } : window(count, ttl)
    },
    async hit(address) {
      const key = prefix + address
      const [, count, ttl] = values(await redis.multi().set(key, 0, 'PX', windowMs, 'NX').incr(key).pttl(key).exec())
      return window(count, ttl)
    },
  }
}
