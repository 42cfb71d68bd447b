import { ApiError, type ErrorKind } from '../errors.js'

/** The bounds a 429 enforces, each with its code in the catalogue. */
export type TooManyKind = Extract<
  ErrorKind,
  'rateLimited' | 'tooManyInFlight' | 'tooManyConnections' | 'tooManyPageRows' | 'tooMuchPageTime'
>

/**
 * The headers every answer that asks the client to come back later carries (429s, and 503s that will pass): whole
 * seconds, at least one, since `Retry-After: 0` would invite the same request at once.
 */
export function retryAfter(ms: number): Record<string, string> {
  return { 'retry-after': String(waitSeconds(ms)) }
}

/** A wait in whole seconds, rounded up, at least one: Retry-After's, and the RateLimit field's `t`, alike. */
export const waitSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000))

/**
 * Every 429 the service sends is made here: the Error shape with `Retry-After`, to throw from a hook or handler or,
 * for a connection refused before its request is read, to write as a raw answer (socket/raw-response.ts). Without
 * `retryAfterMs` the client can go on as soon as it has done what the message says (read its answers).
 */
export function tooManyRequests(kind: TooManyKind, message: string, retryAfterMs?: number): ApiError {
  return new ApiError(kind, message, retryAfterMs === undefined ? {} : retryAfter(retryAfterMs))
}
