import rateLimit, { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { AuthThrottle } from '../auth/bearer.js'
import { ApiError } from '../errors.js'
import {
  memoryFailureCounter,
  redisFailureCounter,
  type FailureCounter,
  type FailureWindow,
} from '../limits/failure-counter.js'
import type { Rate } from '../limits/rate.js'

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

// One IPv6 client usually holds a whole /64: count it as one address, or each of its addresses would get a budget.
// The last answer is kept: consecutive requests mostly come from one address (a connection's, a proxy's client's),
// and normalizing takes an IPv6 regular expression.
let lastIp = ''
let lastAddress = ''
function clientAddress(request: FastifyRequest): string {
  const ip = request.ip
  if (ip !== lastIp) {
    lastAddress = normalizeIP(ip, 64)
    lastIp = ip
  }
  return lastAddress
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

function tooMany(message: string, retryAfterMs: number): ApiError {
  return new ApiError('rateLimited', message, { 'retry-after': String(seconds(retryAfterMs)) })
}

/**
 * Per token: @fastify/rate-limit, keyed by account and token id (a JWT's is its subject, which two accounts' callers
 * may share), with RateLimit-Limit, -Remaining and -Reset on every authenticated response. If Redis fails, requests
 * are let through (and logged).
 *
 * Its hook is an onRequest hook of the app, added here: call this after bearer authentication has added its own (so
 * `caller` is set, before the body is read) and before registerAccountRateLimit, so that a request this limit
 * refuses never reaches the account's count: one token's flood of refused requests cannot spend the budget of the
 * account's other tokens.
 */
export async function registerTokenRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  if (options.perToken.max === 0) return
  await app.register(rateLimit, {
    // No hook per route: the one hook is added below, in the order the limits must run.
    global: false,
    max: options.perToken.max,
    timeWindow: options.perToken.windowMs,
    keyGenerator: (request) => `token:${request.caller?.accountId ?? ''}:${request.caller?.tokenId ?? ''}`,
    allowList: (request) => request.caller === null,
    enableDraftSpec: true,
    skipOnError: true,
    nameSpace: `${options.namespace ?? 'plantstore:'}rate:`,
    ...(options.redis && { redis: options.redis }),
    onExceeded: () => options.onLimited?.('token'),
    errorResponseBuilder: (_request, context) =>
      tooMany(`rate limit of ${context.max} requests exceeded; retry in ${context.after}`, context.ttl),
  })
  app.addHook('onRequest', app.rateLimit())
}

/** The headers the per-token limit puts on every authenticated response (draft spec names). */
const TOKEN_LIMIT_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'] as const

/** A fixed-window counter for `rate`: in this process, or shared through Redis under the `kind` prefix. */
function windowCounter(options: RateLimitOptions, rate: Rate, kind: string): FailureCounter {
  return options.redis
    ? redisFailureCounter(options.redis, rate.windowMs, `${options.namespace ?? 'plantstore:'}${kind}:`)
    : memoryFailureCounter(rate.windowMs)
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
 * Per account: every request of one account's callers, whichever token or JWT subject, in one fixed window. Without
 * it an account could multiply its budget by making tokens (POST /tokens) or subjects. Registered after the
 * per-token limit (see registerTokenRateLimit), an onRequest hook of the app: only requests that limit let through
 * are counted. If the store fails, requests are let through (logged).
 */
export function registerAccountRateLimit(app: FastifyInstance, options: RateLimitOptions): void {
  const limit = options.perAccount
  if (limit === undefined || limit.max === 0) return
  const counter = windowCounter(options, limit, 'account')
  const storeFailed = storeFailureLog('per account')
  app.addHook('onRequest', (request, reply, done) => {
    const caller = request.caller
    if (caller === null) return done()
    counter.hit(String(caller.accountId)).then(
      (window) => {
        if (window.count <= limit.max) return done()
        options.onLimited?.('account')
        // The per-token limit, which ran first, has set its own RateLimit headers: on this 429 they would tell the
        // client its token has budget left, to retry at once. Retry-After alone says when.
        for (const name of TOKEN_LIMIT_HEADERS) reply.removeHeader(name)
        done(tooMany(`the account's rate limit of ${limit.max} requests exceeded; retry later`, window.resetMs))
      },
      (err: unknown) => {
        storeFailed(request, err)
        done()
      },
    )
  })
}

/** Slows token guessing: an address with too many failed authentications in the window gets 429 until it ends. */
export function authThrottle(app: FastifyInstance, options: RateLimitOptions): AuthThrottle | undefined {
  const { max } = options.authFailures
  if (max === 0) return undefined
  const counter = windowCounter(options, options.authFailures, 'authfail')
  const storeFailed = storeFailureLog('failed authentication')
  const refuse = (resetMs: number) => {
    options.onLimited?.('auth_failures')
    return tooMany('too many failed authentication attempts from this address; retry later', resetMs)
  }
  /** Throws the 429 when the address's window is full. */
  const judge = (current: FailureWindow) => {
    if (current.count >= max) throw refuse(current.resetMs)
  }
  return {
    check(request) {
      let current: FailureWindow | Promise<FailureWindow>
      try {
        current = counter.count(clientAddress(request))
      } catch (err) {
        storeFailed(request, err)
        return undefined
      }
      // The in-process counter answers at once: no promise for the common case.
      if (!(current instanceof Promise)) {
        judge(current)
        return undefined
      }
      return current.then(judge, (err: unknown) => storeFailed(request, err))
    },
    async refused(request) {
      let hit: FailureWindow
      try {
        hit = await counter.hit(clientAddress(request))
      } catch (err) {
        return storeFailed(request, err)
      }
      if (hit.count > max) throw refuse(hit.resetMs)
    },
  }
}
