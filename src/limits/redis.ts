import type { Redis } from 'ioredis'

type LogFn = (fields: object, message: string) => void

/** Where the shared store's outages are told. */
export interface OutageLog {
  warn: LogFn
  info: LogFn
}

/**
 * The one owner of the shared store's up/down state, and of the lines that say when it changes: one when an outage
 * starts, one when it ends, nothing in between. It is told of connection events and of every command's outcome, so
 * an outage shows whether the connection drops (refused, reset) or stays up while commands time out (a frozen
 * server). An outcome counts only if its command was sent since the last change: a command sent before an outage
 * that is answered late does not end it, nor does one sent during it that fails late start another.
 */
export class StoreHealth {
  #down = false
  /** State changes so far: commands remember it when sent. */
  #changes = 0
  #log: OutageLog | undefined

  logTo(log: OutageLog): void {
    this.#log = log
  }

  /** Stamp for a command being sent now. */
  get stamp(): number {
    return this.#changes
  }

  /** The store cannot be reached (a connection error, or a command sent at `stamp` failed or timed out). */
  failed(reason: string, stamp = this.#changes): void {
    if (this.#down || stamp !== this.#changes) return
    this.#down = true
    this.#changes++
    this.#log?.warn({ err: reason }, 'redis unavailable; rate limits are not enforced until it is back')
  }

  /** The store answered (a connection became ready, or a command sent at `stamp` got its reply). */
  answered(stamp = this.#changes): void {
    if (!this.#down || stamp !== this.#changes) return
    this.#down = false
    this.#changes++
    this.#log?.info({}, 'redis available again')
  }
}

/** ioredis's class of errors Redis itself answered: the store is up, whatever the command's fault. */
const answeredByRedis = (err: unknown) => err instanceof Error && err.name === 'ReplyError'

/** Feeds `health` with the outcome of every command `redis` sends, the commands of a MULTI included. */
function observeCommands(redis: Redis, health: StoreHealth): void {
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = (command, stream) => {
    const stamp = health.stamp
    const sent = send(command, stream)
    command.promise.then(
      () => health.answered(stamp),
      (err: unknown) => {
        // Commands refused after quit() are the service closing, not an outage.
        if (redis.status === 'end') return
        if (answeredByRedis(err)) health.answered(stamp)
        else health.failed(err instanceof Error ? err.message : String(err), stamp)
      },
    )
    return sent
  }
}

/**
 * A Redis client for shared rate limits that fails fast while Redis is away, and says so once per outage, when it
 * starts and when it ends (StoreHealth). It connects once logTo() has given it the service's logger, so even the
 * first failure is logged there. The client library loads only when Redis is configured (it adds about 25 MB to a
 * process).
 */
export async function connectRedis(url: string): Promise<{ redis: Redis; logTo(log: OutageLog): void }> {
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
  const health = new StoreHealth()
  observeCommands(redis, health)
  redis.on('error', (err: Error) => health.failed(err.message))
  redis.on('ready', () => health.answered())
  return {
    redis,
    logTo(log) {
      health.logTo(log)
      // Failures show as 'error' events (told to health above) and the client keeps retrying by itself.
      redis.connect().catch(() => {})
    },
  }
}
