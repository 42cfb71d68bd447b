import type { FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { Caller } from '../auth/caller.js'
import type { ApiError } from '../errors.js'
import { addressKey } from './client-address.js'
import type { Rate } from './rate.js'
import { tooManyRequests } from './too-many.js'
import { memoryWindowCounter, redisWindowCounter, type Window, type WindowCounter } from './window-counter.js'
import { andThen, recovering } from '../maybe-async.js'

/** Which limit refused a request. */
export type RateLimitKind = 'token' | 'account' | 'auth_failures'

/** Rate limits: per token, and per client address for failed authentication; shared when `redis` is given. */
export interface RateLimitOptions {
  perToken: Rate
  authFailures: Rate
  /** Over all of one account's tokens and JWT subjects; none when not given. */
  perAccount?: Rate
  redis?: Redis
  /** Prefix of every Redis key (default `plantstore:`), so deployments or test runs sharing a Redis stay apart. */
  namespace?: string
  /** Told of every request refused with 429, by limit. */
  onLimited?: (limit: RateLimitKind) => void
}

/** What a caller's request left of its token's window: sent on every authenticated answer. */
export interface TokenBudget {
  limit: number
  remaining: number
  resetSeconds: number
}

/** The outcome of counting one request: the token's budget when it has a limit, and the 429 when it is refused. */
export interface Admission {
  budget?: TokenBudget
  refusal?: ApiError
}

const ADMITTED: Admission = {}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000))
const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`
/** "42 seconds", "1 minute", "3 minutes": the wait in its largest unit, as the 429s have always said it. */
const waitText = (ms: number) => {
  const secs = Math.max(1, Math.round(ms / 1000))
  return secs < 60 ? plural(secs, 'second') : plural(Math.round(secs / 60), 'minute')
}

function counterFor(options: RateLimitOptions, rate: Rate, kind: string): WindowCounter {
  return options.redis
    ? redisWindowCounter(options.redis, rate.windowMs, `${options.namespace ?? 'plantstore:'}${kind}:`)
    : memoryWindowCounter(rate.windowMs)
}

/**
 * While a counter's store is away, requests go through. Outages, dropped connections and frozen servers alike, are
 * logged when they start and when they end by the Redis client's StoreHealth (limits/redis.ts); this logs each
 * counter's failures, an outage's or another (a Redis without the data it should hold, say), at most once a minute.
 */
function storeFailureLog(what: string): (request: FastifyRequest, err: unknown) => void {
  let warnedAt = 0
  return (request, err) => {
    if (Date.now() - warnedAt < 60_000) return
    warnedAt = Date.now()
    request.log.warn({ err }, `rate limit store failed; not limiting ${what}`)
  }
}

/**
 * The limits on an authenticated caller, in this order: per token (a JWT's per account and subject, which two
 * accounts' callers may share), then per account over all of its tokens and subjects, so that making tokens does not
 * make budget. A request the token's limit refuses is not counted against the account: one token's flood of refused
 * requests cannot spend the budget of the account's other tokens. Fixed windows; if the store fails, requests are
 * let through (logged).
 */
export class CallerLimits {
  readonly #options: RateLimitOptions
  readonly #token: WindowCounter | undefined
  readonly #account: WindowCounter | undefined
  readonly #tokenFailed = storeFailureLog('per token')
  readonly #accountFailed = storeFailureLog('per account')

  constructor(options: RateLimitOptions) {
    this.#options = options
    // The per-token keys keep the names they had under @fastify/rate-limit, so a rolling upgrade shares the counts.
    if (options.perToken.max > 0) this.#token = counterFor(options, options.perToken, 'rate')
    const account = options.perAccount
    if (account !== undefined && account.max > 0) this.#account = counterFor(options, account, 'account')
  }

  /** Counts `caller`'s request; at once unless a shared store must answer. */
  admit(caller: Caller, request: FastifyRequest): Admission | Promise<Admission> {
    const counter = this.#token
    if (counter === undefined) return this.#admitAccount(caller, request, undefined)
    // While the store is away the request goes through, its answer saying the whole budget is left.
    const unlimited = (err: unknown) => {
      this.#tokenFailed(request, err)
      const { max } = this.#options.perToken
      return this.#admitAccount(caller, request, { limit: max, remaining: max, resetSeconds: 0 })
    }
    const key = `token:${caller.accountId}:${caller.tokenId}`
    return recovering(() => andThen(counter.hit(key), (window) => this.#judgeToken(caller, request, window)), unlimited)
  }

  #judgeToken(caller: Caller, request: FastifyRequest, window: Window): Admission | Promise<Admission> {
    const { max } = this.#options.perToken
    const budget = { limit: max, remaining: Math.max(0, max - window.count), resetSeconds: seconds(window.resetMs) }
    if (window.count <= max) return this.#admitAccount(caller, request, budget)
    this.#options.onLimited?.('token')
    const message = `rate limit of ${max} requests exceeded; retry in ${waitText(window.resetMs)}`
    const refusal = tooManyRequests('rateLimited', message, window.resetMs)
    return { budget, refusal }
  }

  #admitAccount(caller: Caller, request: FastifyRequest, budget?: TokenBudget): Admission | Promise<Admission> {
    const counter = this.#account
    const admitted = budget === undefined ? ADMITTED : { budget }
    if (counter === undefined) return admitted
    const judge = (window: Window): Admission => {
      const { max } = this.#options.perAccount!
      if (window.count <= max) return admitted
      this.#options.onLimited?.('account')
      // No token budget on this answer: it would tell the client its token has budget left, to retry at once.
      const message = `the account's rate limit of ${max} requests exceeded; retry later`
      return { refusal: tooManyRequests('rateLimited', message, window.resetMs) }
    }
    return recovering(
      () => andThen(counter.hit(String(caller.accountId)), judge),
      (err) => {
        this.#accountFailed(request, err)
        return admitted
      },
    )
  }
}

/** Slows token guessing: an address with too many failed authentications in the window gets 429 until it ends. */
export class AuthThrottle {
  readonly #options: RateLimitOptions
  readonly #counter: WindowCounter
  readonly #storeFailed = storeFailureLog('failed authentication')

  /** The throttle the options ask for; none when its limit is 0. */
  static from(options: RateLimitOptions): AuthThrottle | undefined {
    return options.authFailures.max === 0 ? undefined : new AuthThrottle(options)
  }

  private constructor(options: RateLimitOptions) {
    this.#options = options
    this.#counter = counterFor(options, options.authFailures, 'authfail')
  }

  /**
   * Refuses (429) a client that may not try again yet: throws at once when the count is at hand (kept in this
   * process), else returns a promise that rejects; undefined when the client may go on at once.
   */
  check(request: FastifyRequest): Promise<void> | undefined {
    let current: Window | Promise<Window>
    try {
      current = this.#counter.count(addressKey(request.ip))
    } catch (err) {
      this.#storeFailed(request, err)
      return undefined
    }
    if (!(current instanceof Promise)) return void this.#judge(current.count >= this.#max, current)
    return current.then(
      (window) => this.#judge(window.count >= this.#max, window),
      (err: unknown) => this.#storeFailed(request, err),
    )
  }

  /** Records a refused token; throws (429) when that attempt crossed the limit. */
  async refused(request: FastifyRequest): Promise<void> {
    let hit: Window
    try {
      hit = await this.#counter.hit(addressKey(request.ip))
    } catch (err) {
      return this.#storeFailed(request, err)
    }
    this.#judge(hit.count > this.#max, hit)
  }

  get #max(): number {
    return this.#options.authFailures.max
  }

  #judge(over: boolean, window: Window): void {
    if (!over) return
    this.#options.onLimited?.('auth_failures')
    const message = 'too many failed authentication attempts from this address; retry later'
    throw tooManyRequests('rateLimited', message, window.resetMs)
  }
}
