/**
 * The error catalogue: every error the API returns has one stable numeric
 * `error` value here, one per cause. Clients may switch on these numbers;
 * they never change meaning once released. `example` is a message the
 * service answers with, for the OpenAPI document's examples.
 */
export const ErrorCatalogue = {
  validation: {
    error: 40001,
    status: 400,
    summary: 'A parameter or body field is invalid',
    example: 'body.name: expected string',
  },
  malformedJson: {
    error: 40002,
    status: 400,
    summary: 'The request body is not valid JSON',
    example: 'body: malformed JSON (Unexpected end of JSON input)',
  },
  malformedRequest: {
    error: 40003,
    status: 400,
    summary: 'The HTTP request itself is malformed',
    example: 'an HTTP/1.1 request needs a Host header',
  },
  duplicateHeader: {
    error: 40004,
    status: 400,
    summary: 'A header that must appear once (Authorization, Host) was sent more than once',
    example: 'Authorization: sent more than once; send it once',
  },
  missingToken: {
    error: 40101,
    status: 401,
    summary: 'No bearer token was sent',
    example: 'Authorization header with a Bearer token is required',
  },
  invalidToken: {
    error: 40102,
    status: 401,
    summary: 'The bearer token is malformed, unknown, expired or revoked',
    example: 'bearer token has expired',
  },
  insufficientScope: {
    error: 40301,
    status: 403,
    summary: 'The token lacks the scope the operation needs',
    example: 'token lacks the scope plants:write this operation needs',
  },
  plantNotFound: {
    error: 40401,
    status: 404,
    summary: 'The account has no plant with that id',
    example: 'no plant with id 7',
  },
  routeNotFound: {
    error: 40402,
    status: 404,
    summary: 'No route matches the method and path',
    example: 'no route for GET /plant',
  },
  subscriptionNotFound: {
    error: 40403,
    status: 404,
    summary: 'The account has no webhook subscription with that id',
    example: 'no webhook subscription with id whk_0123456789abcdef',
  },
  tokenNotFound: {
    error: 40404,
    status: 404,
    summary: 'The account has no token with that id',
    example: 'no token with id tok_0123456789abcdef',
  },
  requestTimeout: {
    error: 40801,
    status: 408,
    summary: 'The request (headers or body) did not arrive within the server timeout',
    example: 'the request did not arrive in time; the connection is closed',
  },
  conflict: {
    error: 40901,
    status: 409,
    summary: 'A plant with that id exists with a different name or tag',
    example: 'a plant with id 1 already exists with a different name or tag',
  },
  quotaExceeded: {
    error: 40902,
    status: 409,
    summary:
      'The account holds its quota of this resource (plants, webhook subscriptions or tokens); remove some first',
    example: 'the account holds its quota of 1000000 plants; delete some before creating more',
  },
  idempotencyKeyInUse: {
    error: 40903,
    status: 409,
    summary: 'The first request sent with this Idempotency-Key is still running; retry after `Retry-After`',
    example: 'Idempotency-Key: its first request is still running; retry in 1 second',
  },
  bodyTooLarge: {
    error: 41301,
    status: 413,
    summary: 'The request body is over the size limit',
    example: 'body: over the 64 KiB limit',
  },
  unsupportedMediaType: {
    error: 41501,
    status: 415,
    summary: 'The request body is not application/json',
    example: 'Content-Type must be application/json',
  },
  unsupportedEncoding: {
    error: 41502,
    status: 415,
    summary: 'The request body has a Content-Encoding other than identity',
    example: 'Content-Encoding must be identity (bodies are not decompressed)',
  },
  idempotencyKeyReused: {
    error: 42201,
    status: 422,
    summary:
      'The Idempotency-Key was sent before with a different request (operation, token or body); nothing was done',
    example: 'Idempotency-Key: already used for a different request; use a new key for a new request',
  },
  rateLimited: {
    error: 42901,
    status: 429,
    summary: 'Too many requests; retry later',
    example: 'rate limit of 600 requests exceeded; retry in 1 minute',
  },
  tooManyInFlight: {
    error: 42902,
    status: 429,
    summary: 'Too many requests in flight on one connection (pipelined); the connection is closed',
    example: 'more than 16 requests in flight on one connection; read the answers before sending more',
  },
  tooManyConnections: {
    error: 42903,
    status: 429,
    summary: 'Too many open connections from this client address; the connection is closed',
    example: '64 connections from this address are open; close one first',
  },
  tooManyPageRows: {
    error: 42904,
    status: 429,
    summary: "The account's pages in progress (rows, counted by `limit`) are at its bound; read them, or retry shortly",
    example:
      "a page of 1000 rows would take the account's pages in progress past 1000 rows; read the pages already sent, or retry in 1 second",
  },
  tooMuchPageTime: {
    error: 42905,
    status: 429,
    summary:
      "The account's pages took more than its share of this busy instance's time in the last second; retry shortly",
    example:
      "the account's pages took more than its share of this busy instance's time in the last second; retry in 1 second",
  },
  headersTooLarge: {
    error: 43101,
    status: 431,
    summary: 'The request headers are over 16 KiB',
    example: 'request headers are over 16 KiB',
  },
  internal: {
    error: 50001,
    status: 500,
    summary: 'An unexpected error on the server',
    example: 'internal server error',
  },
  unavailable: {
    error: 50301,
    status: 503,
    summary: 'The storage is unavailable; retry later',
    example: 'storage is unavailable; retry shortly',
  },
  shuttingDown: {
    error: 50302,
    status: 503,
    summary: 'This instance is shutting down; retry on another',
    example: 'this instance is shutting down; retry on another',
  },
  atCapacity: {
    error: 50303,
    status: 503,
    summary: 'This instance has as many open connections as it takes; the connection is closed, retry shortly',
    example: 'this instance has 10000 open connections; retry shortly or on another',
  },
  serverPagesBusy: {
    error: 50304,
    status: 503,
    summary: 'This instance has as many rows of pages in progress as it takes, over all accounts; retry shortly',
    example: 'this instance has 8000 rows of pages in progress; retry in 1 second or on another instance',
  },
} as const

/** A catalogue entry's name. */
export type ErrorKind = keyof typeof ErrorCatalogue

/** The Content-Type of every error answer. */
export const ERROR_CONTENT_TYPE = 'application/json; charset=utf-8'

/** The Error shape `{error, message}` of a catalogue entry, and its status: every error answer is written from it. */
export function errorAnswer(
  kind: ErrorKind,
  message: string,
): { status: number; body: { error: number; message: string } } {
  const { status, error } = ErrorCatalogue[kind]
  return { status, body: { error, message } }
}

/** An error the API answers with a catalogue entry and a message safe to show the client. */
export class ApiError extends Error {
  readonly kind: ErrorKind
  readonly statusCode: number
  readonly headers: Record<string, string>

  constructor(kind: ErrorKind, message: string, headers: Record<string, string> = {}) {
    super(message)
    this.name = 'ApiError'
    this.kind = kind
    this.statusCode = ErrorCatalogue[kind].status
    this.headers = headers
  }
}
