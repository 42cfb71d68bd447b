import { createHash, randomUUID } from 'node:crypto'
import { setImmediate as setImmediatePromise } from 'node:timers/promises'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { callerOf } from '../auth/caller.js'
import { HOUR_MS, IDEMPOTENCY_KEY_HOURS_DEFAULT } from '../config.js'
import { ApiError, ErrorCatalogue } from '../errors.js'
import { retryAfter } from '../limits/too-many.js'
import { IDEMPOTENCY_KEY_HEADER, idempotencyKey, REPLAYED_HEADER } from '../schemas/idempotency-key.js'
import type { IdempotencyStore } from '../storage/index.js'

/** How long answers are kept and claims held, and how often expired keys are purged. */
export interface IdempotencySettings {
  /** How long a key's answer is replayed (PLANTSTORE_IDEMPOTENCY_KEY_HOURS). */
  ttlMs: number
  /**
   * How long a running request holds its key: a retry after that (its instance stopped mid-request, say) runs again.
   * Four times the longest a handler waits by design (a webhook URL's DNS lookup, a lock: 5 s each), so a request
   * still running is not taken over; short enough for a client's retries to get through after an instance died.
   */
  leaseMs?: number
  /** How often each instance deletes expired keys. */
  purgeEveryMs?: number
}

export const IDEMPOTENCY_DEFAULTS = {
  ttlMs: IDEMPOTENCY_KEY_HOURS_DEFAULT * HOUR_MS,
  leaseMs: 60_000,
  purgeEveryMs: 60_000,
}
// Keys deleted per statement: bounded work per statement (and per turn of SQLite's event loop), whatever expired.
const PURGE_BATCH = 1000

/** A route's hooks for requests with an Idempotency-Key: claim (preHandler), then keep or free (onSend). */
export interface IdempotencyHooks {
  preHandler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>
  onSend: (request: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>
}

interface Held {
  accountId: number
  key: string
  lease: string
}

/** JSON with sorted keys and exact integers: equal requests, however their bodies were written, read the same. */
function canonical(value: unknown): string {
  if (typeof value === 'bigint') return value.toString()
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonical(item)}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** What a request asks, as a digest: its operation, its caller (token, or JWT subject), its path and body. */
function fingerprint(request: FastifyRequest): Buffer {
  const what = [request.method, request.routeOptions.url, callerOf(request).tokenId, request.params, request.body]
  return createHash('sha256').update(canonical(what)).digest()
}

// Error codes whose request may succeed later as it is: a quota held now (40902). Their answer is not kept, so that
// the same key runs again once there is room.
const PASSING: ReadonlySet<number> = new Set([ErrorCatalogue.quotaExceeded.error])

/** Whether an answer is kept for replay: any but 5xx and a passing refusal. */
function kept(status: number, payload: unknown): payload is string {
  if (typeof payload !== 'string' || status >= 500) return false
  if (status < 400) return true
  const { error } = JSON.parse(payload) as { error?: number }
  return error === undefined || !PASSING.has(error)
}

/**
 * The hooks of an operation that honours Idempotency-Key. The key is claimed after validation (a malformed key or
 * body is 400 and claims nothing), so only a request that reaches its handler holds one; its answer is kept before
 * it is sent, unless its status is 500 or more or its refusal may pass (the key is freed, and a retry runs again).
 */
export function idempotencyHooks(store: IdempotencyStore, settings: IdempotencySettings): IdempotencyHooks {
  const ttlMs = settings.ttlMs
  const leaseMs = settings.leaseMs ?? IDEMPOTENCY_DEFAULTS.leaseMs
  const held = new WeakMap<FastifyRequest, Held>()
  return {
    async preHandler(request, reply) {
      const header = request.headers[IDEMPOTENCY_KEY_HEADER]
      if (typeof header !== 'string') return
      const claim = { accountId: callerOf(request).accountId, key: idempotencyKey(header), lease: randomUUID() }
      const outcome = await store.claim({ ...claim, fingerprint: fingerprint(request), ttlMs, leaseMs })
      if (outcome.state === 'claimed') return void held.set(request, claim)
      if (outcome.state === 'mismatch') {
        throw new ApiError(
          'idempotencyKeyReused',
          'Idempotency-Key: already used for a different request; use a new key for a new request',
        )
      }
      if (outcome.state === 'running') {
        throw new ApiError(
          'idempotencyKeyInUse',
          'Idempotency-Key: its first request is still running; retry in 1 second',
          retryAfter(1000),
        )
      }
      return reply
        .code(outcome.status)
        .header(REPLAYED_HEADER, 'true')
        .type('application/json; charset=utf-8')
        .send(outcome.body)
    },
    async onSend(request, reply, payload) {
      const claim = held.get(request)
      if (claim === undefined) return payload
      held.delete(request)
      const { accountId, key, lease } = claim
      const status = reply.statusCode
      // The answer goes out whatever this meets: a create that happened must not read as a failure. A key not kept
      // stays claimed until its lease lapses; the same request may then run again.
      try {
        if (kept(status, payload)) await store.complete(accountId, key, lease, status, payload)
        else await store.release(accountId, key, lease)
      } catch (err) {
        request.log.warn({ err }, 'the answer of a request with an Idempotency-Key could not be kept')
      }
      return payload
    },
  }
}

/** A preHandler for a create that cannot honour Idempotency-Key: 400, rather than a retry that is not safe. */
export function refuseIdempotencyKey(why: string) {
  return async (request: FastifyRequest): Promise<void> => {
    if (request.headers[IDEMPOTENCY_KEY_HEADER] === undefined) return
    throw new ApiError('validation', `headers.idempotency-key: not accepted here; ${why}`)
  }
}

/**
 * Deletes expired keys every `purgeEveryMs` while the app runs (each instance: the purge skips rows another holds),
 * PURGE_BATCH per statement until none is left. Stops a purge under way, after its statement, when the app closes.
 */
export function registerIdempotencyPurge(app: FastifyInstance, store: IdempotencyStore, everyMs: number): void {
  let running: Promise<void> | undefined
  let closing = false
  // Until a batch comes back short: a purge keeps up with any rate of new keys, a batch at a time, requests between.
  const purge = async () => {
    while ((await store.purgeExpired(PURGE_BATCH)) === PURGE_BATCH && !closing) await setImmediatePromise()
  }
  // A purge still under way when the next is due is left to finish: they never overlap.
  const timer = setInterval(() => {
    running ??= purge()
      .catch((err: unknown) => app.log.warn({ err }, 'purging expired idempotency keys failed'))
      .finally(() => (running = undefined))
  }, everyMs).unref()
  app.addHook('onClose', async () => {
    closing = true
    clearInterval(timer)
    await running
  })
}
