import type { FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { Caller } from '../auth/caller.js'
import type { ApiError } from '../errors.js'
import { addressKey } from './client-address.js'
import type { Rate } from './rate.js'
import { tooManyRequests, waitSeconds } from './too-many.js'
import { memoryRateStore, redisRateStore, type Budget, type RateStore } from './rate-store.js'
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
  /**
   * The clock of the budgets kept in this process, in ms (the monotonic clock when not given), so that a test can
   * move it; Redis's own clock counts the shared ones.
   */
  now?: () => number
}

/** The quota policies a caller's request is counted against, as the RateLimit fields name them. */
export type PolicyName = 'token' | 'account'

/** What a request left of one policy's budget, for its RateLimit field; `budget` undefined while its store is away. */
export interface PolicyBudget {
  policy: PolicyName
  rate: Rate
  budget: Budget | undefined
}

/** The outcome of counting one request: what it left of each policy in force, and the 429 when it is refused. */
export interface Admission {
  budgets: PolicyBudget[]
  refusal?: ApiError
}

const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`
/** "42 seconds", "1 minute", "3 minutes": the wait in its largest unit, as the 429s have always said it. */
const waitText = (ms: number) => {
  // Rounded up as Retry-After is: the message never says less than the header.
  const secs = waitSeconds(ms)
  return secs < 60 ? plural(secs, 'second') : plural(Math.round(secs / 60), 'minute')
}

// Keys of their own (`gcra:`): the fixed-window counts an earlier version kept under `rate:`, `account:` and
// `authfail:` are integers of another meaning, left to expire.
function storeFor(options: RateLimitOptions, rate: Rate, kind: string): RateStore {
  return options.redis
    ? redisRateStore(options.redis, rate, `${options.namespace ?? 'plantstore:'}gcra:${kind}:`)
    : memoryRateStore(rate, undefined, options.now)
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
 * requests cannot spend the budget of the account's other tokens. Budgets refill continuously (rate-store.ts); if a
 * store fails, requests are let through (logged).
 */
export class CallerLimits {
  readonly #options: RateLimitOptions
  readonly #token: RateStore | undefined
  readonly #account: RateStore | undefined
  readonly #tokenFailed = storeFailureLog('per token')
  readonly #accountFailed = storeFailureLog('per account')

  constructor(options: RateLimitOptions) {
    this.#options = options
    if (options.perToken.max > 0) this.#token = storeFor(options, options.perToken, 'token')
    const account = options.perAccount
    if (account !== undefined && account.max > 0) this.#account = storeFor(options, account, 'account')
  }

  /** The policies in force, as the RateLimit-Policy field lists them; empty when there is none. */
  get policies(): Array<{ policy: PolicyName; rate: Rate }> {
    return [
      ...(this.#token ? [{ policy: 'token' as const, rate: this.#options.perToken }] : []),
      ...(this.#account ? [{ policy: 'account' as const, rate: this.#options.perAccount! }] : []),
    ]
  }

  /** Counts `caller`'s request; at once unless a shared store must answer. */
  admit(caller: Caller, request: FastifyRequest): Admission | Promise<Admission> {
    const store = this.#token
    if (store === undefined) return this.#admitAccount(caller, request, [])
    const rate = this.#options.perToken
    const unlimited = (err: unknown) => {
      this.#tokenFailed(request, err)
      return this.#admitAccount(caller, request, [{ policy: 'token', rate, budget: undefined }])
    }
    const key = `${caller.accountId}:${caller.tokenId}`
    return recovering(() => andThen(store.take(key), (budget) => this.#judgeToken(caller, request, budget)), unlimited)
  }

  #judgeToken(caller: Caller, request: FastifyRequest, budget: Budget): Admission | Promise<Admission> {
    const rate = this.#options.perToken
    const budgets: PolicyBudget[] = [{ policy: 'token', rate, budget }]
    if (budget.allowed) return this.#admitAccount(caller, request, budgets)
    this.#options.onLimited?.('token')
    const message = `rate limit of ${plural(rate.max, 'request')} exceeded; retry in ${waitText(budget.nextMs)}`
    return { budgets, refusal: tooManyRequests('rateLimited', message, budget.nextMs) }
  }

  #admitAccount(caller: Caller, request: FastifyRequest, budgets: PolicyBudget[]): Admission | Promise<Admission> {
    const store = this.#account
    if (store === undefined) return { budgets }
    const rate = this.#options.perAccount!
    const judge = (budget: Budget): Admission => {
      const all: PolicyBudget[] = [...budgets, { policy: 'account', rate, budget }]
      if (budget.allowed) return { budgets: all }
      this.#options.onLimited?.('account')
      const message = `the account's rate limit of ${plural(rate.max, 'request')} exceeded; retry in ${waitText(budget.nextMs)}`
      return { budgets: all, refusal: tooManyRequests('rateLimited', message, budget.nextMs) }
    }
    return recovering(
      () => andThen(store.take(String(caller.accountId)), judge),
      (err) => {
        this.#accountFailed(request, err)
        return { budgets: [...budgets, { policy: 'account', rate, budget: undefined }] }
      },
    )
  }
}

/** Slows token guessing: an address out of failed authentications gets 429 until one more is refilled. */
export class AuthThrottle {
  readonly #options: RateLimitOptions
  readonly #store: RateStore
  readonly #storeFailed = storeFailureLog('failed authentication')

  /** The throttle the options ask for; none when its limit is 0. */
  static from(options: RateLimitOptions): AuthThrottle | undefined {
    return options.authFailures.max === 0 ? undefined : new AuthThrottle(options)
  }

  private constructor(options: RateLimitOptions) {
    this.#options = options
    this.#store = storeFor(options, options.authFailures, 'authfail')
  }

  /**
   * Refuses (429) a client that may not try again yet: throws at once when the budget is at hand (kept in this
   * process), else returns a promise that rejects; undefined when the client may go on at once.
   */
  check(request: FastifyRequest): Promise<void> | undefined {
    let current: Budget | Promise<Budget>
    try {
      current = this.#store.peek(addressKey(request.ip))
    } catch (err) {
      this.#storeFailed(request, err)
      return undefined
    }
    if (!(current instanceof Promise)) return void this.#judge(current)
    return current.then(
      (budget) => this.#judge(budget),
      (err: unknown) => this.#storeFailed(request, err),
    )
  }

  /** Records a refused token; throws (429) when the address had no failure left to spend. */
  async refused(request: FastifyRequest): Promise<void> {
    let taken: Budget
    try {
      taken = await this.#store.take(addressKey(request.ip))
    } catch (err) {
      return this.#storeFailed(request, err)
    }
    this.#judge(taken)
  }

  #judge(budget: Budget): void {
    if (budget.allowed) return
    this.#options.onLimited?.('auth_failures')
    const message = 'too many failed authentication attempts from this address; retry later'
    throw tooManyRequests('rateLimited', message, budget.nextMs)
  }
}
