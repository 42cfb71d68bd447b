import type { Redis } from 'ioredis'

/**
 * A Redis client for shared rate limits that fails fast while Redis is away and says so once per outage.
 * It connects once logTo() has given it the service's logger, so even the first failure is logged there.
 * The client library loads only when Redis is configured (it adds about 25 MB to a process).
 */
export async function connectRedis(
  url: string,
): Promise<{ redis: Redis; logTo(log: { warn: LogFn; info: LogFn }): void }> {
  const { Redis } = await import('ioredis')
  // No offline queue and one retry: a command fails at once while Redis is down, and the limiter lets the
  // request through instead of holding it.
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    connectTimeout: 1000,
    // A Redis that accepts but does not answer must not hold requests: give up and let them through.
    commandTimeout: 250,
    enableOfflineQueue: false,
    lazyConnect: true,
  })
  let log: { warn: LogFn; info: LogFn } | undefined
  let down = false
  redis.on('error', (err: Error) => {
    if (down) return
    down = true
    log?.warn({ err: err.message }, 'redis unavailable; rate limits are not enforced until it is back')
  })
  redis.on('ready', () => {
    if (down) log?.info({}, 'redis available again')
    down = false
  })
  return {
    redis,
    logTo(next) {
      log = next
      // Failures show as 'error' events (logged above) and the client keeps retrying by itself.
      redis.connect().catch(() => {})
    },
  }
}

type LogFn = (fields: object, message: string) => void
