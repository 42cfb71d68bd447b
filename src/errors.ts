/**
 * The error catalogue: every error the API returns has one stable numeric
 * `error` value here, one per cause. Clients may switch on these numbers;
 * they never change meaning once released.
 */
export const ErrorCatalogue = {
  validation: { error: 40001, status: 400, summary: 'A parameter or body field is invalid' },
  malformedJson: { error: 40002, status: 400, summary: 'The request body is not valid JSON' },
  malformedRequest: { error: 40003, status: 400, summary: 'The HTTP request itself is malformed' },
  duplicateHeader: {
    error: 40004,
    status: 400,
    summary: 'A header that must appear once (Authorization, Host) was sent more than once',
  },
  missingToken: { error: 40101, status: 401, summary: 'No bearer token was sent' },
  invalidToken: {
    error: 40102,
    status: 401,
    summary: 'The bearer token is malformed, unknown, expired or revoked',
  },
  insufficientScope: {
    error: 40301,
    status: 403,
    summary: 'The token lacks the scope the operation needs',
  },
  plantNotFound: { error: 40401, status: 404, summary: 'The account has no plant with that id' },
  routeNotFound: { error: 40402, status: 404, summary: 'No route matches the method and path' },
  subscriptionNotFound: { error: 40403, status: 404, summary: 'The account has no webhook subscription with that id' },
  requestTimeout: {
    error: 40801,
    status: 408,
    summary: 'The request (headers or body) did not arrive within the server timeout',
  },
  conflict: {
    error: 40901,
    status: 409,
    summary: 'A plant with that id exists with a different name or tag',
  },
  quotaExceeded: {
    error: 40902,
    status: 409,
    summary: 'The account holds its quota of this resource (plants or webhook subscriptions); remove some first',
  },
  bodyTooLarge: { error: 41301, status: 413, summary: 'The request body is over the size limit' },
  unsupportedMediaType: {
    error: 41501,
    status: 415,
    summary: 'The request body is not application/json',
  },
  unsupportedEncoding: {
    error: 41502,
    status: 415,
    summary: 'The request body has a Content-Encoding other than identity',
  },
  rateLimited: { error: 42901, status: 429, summary: 'Too many requests; retry later' },
  tooManyInFlight: {
    error: 42902,
    status: 429,
    summary: 'Too many requests in flight on one connection (pipelined); the connection is closed',
  },
  tooManyConnections: {
    error: 42903,
    status: 429,
    summary: 'Too many open connections from this client address; the connection is closed',
  },
  headersTooLarge: { error: 43101, status: 431, summary: 'The request headers are over 16 KiB' },
  internal: { error: 50001, status: 500, summary: 'An unexpected error on the server' },
  unavailable: { error: 50301, status: 503, summary: 'The storage is unavailable; retry later' },
  shuttingDown: { error: 50302, status: 503, summary: 'This instance is shutting down; retry on another' },
  atCapacity: {
    error: 50303,
    status: 503,
    summary: 'This instance has as many open connections as it takes; the connection is closed, retry shortly',
  },
} as const

/** A catalogue entry's name. */
export type ErrorKind = keyof typeof ErrorCatalogue

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

// Thrown by storage when the database cannot be reached or written; maps to 503.
export { StorageUnavailableError } from './storage/types.js'
