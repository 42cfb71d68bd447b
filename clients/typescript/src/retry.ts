import { Pacer } from './pacer.js'

/** When a request is tried again. */
export interface RetryOptions {
  /** Further attempts after the first (default 3); 0 turns retrying off. */
  retries?: number
  /** No retry is made whose wait would end later than this after the first attempt (default 30,000 ms). */
  retryTimeLimitMs?: number
  /**
   * Whether requests wait for the rate-limit budget the service's `RateLimit` fields tell (default true), so that
   * many at once are not refused; false sends each at once.
   */
  pacing?: boolean
}

/** Which requests may be sent again after a network error left their outcome unknown. */
export type Repeatable = (request: Request) => boolean

const RETRIES_DEFAULT = 3
const TIME_LIMIT_DEFAULT_MS = 30_000
const BACKOFF_MS = 250

// 429: a rate or connection limit; 503: storage unavailable, shutting down or at capacity. Both say when to come back,
// and neither did anything, so any request may be sent again. A 409 with Retry-After (40903): the first request with
// this Idempotency-Key is still running; the retry gets its answer once it is kept.
const RETRIED_STATUSES = new Set([429, 503])
const retried = (response: Response) =>
  RETRIED_STATUSES.has(response.status) || (response.status === 409 && response.headers.has('retry-after'))
/** Reads: the requests repeated after a network error unless a caller says more. */
export const readOnly: Repeatable = (request) => request.method === 'GET' || request.method === 'HEAD'
// An HTTP date as RFC 9110 says to send one (IMF-fixdate); Date.parse alone takes almost any text.
const HTTP_DATE = /^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/

/** Milliseconds a `Retry-After` value (seconds or an HTTP date) asks to wait; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^[0-9]+$/.test(text)) return Number(text) * 1000
  if (!HTTP_DATE.test(text)) return undefined
  const date = Date.parse(text)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

function sleep(ms: number, signal: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/**
 * A fetch that tries a request again after a 429 or 503 (waiting as `Retry-After` says, or backing off when it is
 * absent) or a 409 with `Retry-After` (an Idempotency-Key whose first request is still running) and after a network
 * error when `repeatable` says the request is safe to repeat, within the attempts and the time limit (counted from
 * the first attempt's send). Unless `pacing` is false, every attempt waits first for the rate-limit budget (Pacer),
 * a retry before the requests not yet sent.
 */
export function retryingFetch(
  fetch: (request: Request) => Promise<Response>,
  options: RetryOptions = {},
  repeatable: Repeatable = readOnly,
  // One for every request of the client: the service's budgets are the token's and the account's, not a request's.
  pacer = options.pacing === false ? undefined : new Pacer(),
): (request: Request) => Promise<Response> {
  const retries = options.retries ?? RETRIES_DEFAULT
  const limitMs = options.retryTimeLimitMs ?? TIME_LIMIT_DEFAULT_MS
  if (!Number.isInteger(retries) || retries < 0) throw new RangeError('retries must be a whole number, 0 or more')
  if (!(limitMs >= 0)) throw new RangeError('retryTimeLimitMs must be 0 or more')
  return async (request) => {
    let started: number | undefined
    for (let attempt = 0; ; attempt++) {
      const ticket = await pacer?.acquire(request.signal, attempt > 0)
      const first = (started ??= Date.now())
      const backoff = BACKOFF_MS * 2 ** attempt
      const canWait = (ms: number) => attempt < retries && Date.now() + ms - first <= limitMs
      let response: Response
      try {
        // The body can be read once: every attempt sends a copy.
        response = await fetch(request.clone())
      } catch (err) {
        if (ticket !== undefined) pacer?.settle(ticket, undefined)
        if (request.signal.aborted || !repeatable(request) || !canWait(backoff)) throw err
        await sleep(backoff, request.signal)
        continue
      }
      if (ticket !== undefined) pacer?.settle(ticket, response)
      if (!retried(response)) return response
      const wait = retryAfterMs(response.headers.get('retry-after')) ?? backoff
      if (!canWait(wait)) return response
      await response.body?.cancel()
      await sleep(wait, request.signal)
    }
  }
}
