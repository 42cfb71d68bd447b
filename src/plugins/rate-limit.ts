import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { AuthThrottle } from '../auth/bearer.js'
import { ApiError } from '../errors.js'
import { memoryFailureCounter, redisFailureCounter, type FailureCounter } from '../limits/failure-counter.js'
import type { Rate } from '../limits/rate.js'

/** Rate limits: per token, and per client address for failed authentication; shared when `redis` is given. */
export interface RateLimitOptions {
  perToken: Rate
  authFailures: Rate
  redis?: Redis
  /** Prefix of every Redis key (default `plantstore:`), so deployments or test runs sharing a Redis stay apart. */
  namespace?: string
  /** Told of every request refused with 429, by limit. */
  onLimited?: (limit: 'token' | 'auth_failures') => void
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

function tooMany(message: string, retryAfterMs: number): ApiError {
  return new ApiError('rateLimited', message, { 'retry-after': String(seconds(retryAfterMs)) })
}

/**
 * Per token: @fastify/rate-limit after authentication (preHandler), keyed by token id, with RateLimit-Limit,
 * -Remaining and -Reset on every authenticated response. If Redis fails, requests are let through (and logged).
 */
export async function registerTokenRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  if (options.perToken.max === 0) return
  await app.register(rateLimit, {
    global: true,
    hook: 'preHandler',
    max: options.perToken.max,
    timeWindow: options.perToken.windowMs,
    keyGenerator: (request) => `token:${request.caller?.tokenId ?? ''}`,
    allowList: (request) => request.caller === null,
    enableDraftSpec: true,
    skipOnError: true,
    nameSpace: `${options.namespace ?? 'plantstore:'}rate:`,
    ...(options.redis && { redis: options.redis }),
    onExceeded: () => options.onLimited?.('token'),
    errorResponseBuilder: (_request, context) =>
      tooMany(`rate limit of ${context.max} requests exceeded; retry in ${context.after}`, context.ttl),
  })
}

/** Slows token guessing: an address with too many failed authentications in the window gets 429 until it ends. */
export function authThrottle(app: FastifyInstance, options: RateLimitOptions): AuthThrottle | undefined {
  const { max, windowMs } = options.authFailures
  if (max === 0) return undefined
  const counter: FailureCounter = options.redis
    ? redisFailureCounter(options.redis, windowMs, `${options.namespace ?? 'plantstore:'}authfail:`)
    : memoryFailureCounter(windowMs)
  // While Redis is away, let requests through; the Redis client logs the outage once, not per request.
  const unavailable = (request: FastifyRequest, err: unknown) =>
    request.log.debug({ err }, 'rate limit store unavailable')
  const refuse = (resetMs: number) => {
    options.onLimited?.('auth_failures')
    return tooMany('too many failed authentication attempts from this address; retry later', resetMs)
  }
  return {
    async check(request) {
      let count: number
      try {
        count = await counter.count(request.ip)
      } catch (err) {
        return unavailable(request, err)
      }
      if (count >= max) throw refuse(windowMs)
    },
    async refused(request) {
      let hit: { count: number; resetMs: number }
      try {
        hit = await counter.hit(request.ip)
      } catch (err) {
        return unavailable(request, err)
      }
      if (hit.count > max) throw refuse(hit.resetMs)
    },
  }
}
