/** When a request is tried again. */
export interface RetryOptions {
  /** Further attempts after the first (default 3); 0 turns retrying off. */
  retries?: number
  /** No retry is made whose wait would end later than this after the first attempt (default 30,000 ms). */
  retryTimeLimitMs?: number
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

/**
 * Milliseconds to hold the next request, from a `RateLimit` field (draft-ietf-httpapi-ratelimit-headers-11): the
 * longest `t` of a policy with nothing left (`r=0`); 0 when every policy has some, or the field is absent. Malformed
 * items are ignored, as the draft says.
 */
export function rateLimitPauseMs(value: string | null): number {
  let pause = 0
  for (const item of value?.split(',') ?? []) {
    const match = /^\s*"[^"]*";(.*)$/.exec(item)
    if (match === null) continue
    const params = new Map(match[1]!.split(';').map((param) => param.trim().split('=') as [string, string]))
    const [left, window] = [params.get('r'), params.get('t')]
    if (left !== '0' || window === undefined || !/^[0-9]+$/.test(window)) continue
    pause = Math.max(pause, Number(window) * 1000)
  }
  return pause
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
 * absent) or a 409 with `Retry-After` (an Idempotency-Key whose first request is still running) and after a network error when `repeatable` says the request is safe to repeat, within the attempts and
 * the time limit. It paces itself too: after an answer whose `RateLimit` field says a budget is spent, the next
 * request waits the `t` seconds it names (if that fits in the time limit), so a steady client is not refused.
 */
export function retryingFetch(
  fetch: (request: Request) => Promise<Response>,
  options: RetryOptions = {},
  repeatable: Repeatable = readOnly,
): (request: Request) => Promise<Response> {
  const retries = options.retries ?? RETRIES_DEFAULT
  const limitMs = options.retryTimeLimitMs ?? TIME_LIMIT_DEFAULT_MS
  if (!Number.isInteger(retries) || retries < 0) throw new RangeError('retries must be a whole number, 0 or more')
  if (!(limitMs >= 0)) throw new RangeError('retryTimeLimitMs must be 0 or more')
  // When the last answer's RateLimit field lets the next request go: shared by every request of this client.
  let notBefore = 0
  return async (request) => {
    const started = Date.now()
    const pause = notBefore - started
    if (pause > 0 && pause <= limitMs) await sleep(pause, request.signal)
    for (let attempt = 0; ; attempt++) {
      const backoff = BACKOFF_MS * 2 ** attempt
      const canWait = (ms: number) => attempt < retries && Date.now() + ms - started <= limitMs
      let response: Response
      try {
        // The body can be read once: every attempt sends a copy.
        response = await fetch(request.clone())
      } catch (err) {
        if (request.signal.aborted || !repeatable(request) || !canWait(backoff)) throw err
        await sleep(backoff, request.signal)
        continue
      }
      notBefore = Math.max(notBefore, Date.now() + rateLimitPauseMs(response.headers.get('ratelimit')))
      if (!retried(response)) return response
      const wait = retryAfterMs(response.headers.get('retry-after')) ?? backoff
      if (!canWait(wait)) return response
      await response.body?.cancel()
      await sleep(wait, request.signal)
    }
  }
}
