import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, ERROR_CONTENT_TYPE, errorAnswer, type ErrorKind } from '../errors.js'
import { QuotaExceededError, StorageUnavailableError } from '../storage/index.js'
import { retryAfter } from '../limits/too-many.js'
import { BODY_LIMIT } from './json-body.js'

// Fastify's own client errors, by code, mapped onto the catalogue.
const FASTIFY_CODES: Record<string, ErrorKind> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupportedMediaType',
  FST_ERR_CTP_BODY_TOO_LARGE: 'bodyTooLarge',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'malformedJson',
  FST_ERR_CTP_INVALID_JSON_BODY: 'malformedJson',
}

// How a quota's resource reads in its 409 message, with what to do about it.
const QUOTA_NAMES = {
  plants: 'plants; delete some before creating more',
  subscriptions: 'webhook subscriptions; remove one before adding another',
  tokens: 'tokens not revoked; delete one before creating another',
  'idempotency keys': 'idempotency keys; send the request without Idempotency-Key, or once older keys expire',
} as const

const MESSAGES: Partial<Record<ErrorKind, string>> = {
  unsupportedMediaType: 'Content-Type must be application/json',
  bodyTooLarge: `body: over the ${BODY_LIMIT / 1024} KiB limit`,
}

/** Sends the Error shape for a catalogue entry. */
export function sendError(reply: FastifyReply, kind: ErrorKind, message: string): FastifyReply {
  const { status, body } = errorAnswer(kind, message)
  return reply.code(status).type(ERROR_CONTENT_TYPE).send(body)
}

/** Sends an ApiError with its headers, for gates that answer without throwing. */
export function sendApiError(reply: FastifyReply, err: ApiError): FastifyReply {
  reply.headers(err.headers)
  return sendError(reply, err.kind, err.message)
}

/**
 * Fastify's `frameworkErrors`: errors it raises before routing (a bad percent-encoding, say), which the error
 * handler never sees, leave in the Error shape too, with the request id the request gates would have sent.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id)
  sendError(reply, 'validation', `path: ${err.message}`)
}

function clientKind(err: FastifyError): ErrorKind {
  const known = err.code === undefined ? undefined : FASTIFY_CODES[err.code]
  if (known !== undefined) return known
  return err.statusCode === 404 ? 'routeNotFound' : 'validation'
}

/** One error handler for the app: every error leaves as `{error, message}`; 5xx messages say nothing internal. */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (err instanceof ApiError) return sendApiError(reply, err)
    if (err instanceof QuotaExceededError) {
      return sendError(
        reply,
        'quotaExceeded',
        `the account holds its quota of ${err.limit} ${QUOTA_NAMES[err.resource]}`,
      )
    }
    if (err instanceof StorageUnavailableError) {
      request.log.warn({ err: err.cause }, 'storage unavailable')
      reply.headers(retryAfter(1000))
      return sendError(reply, 'unavailable', 'storage is unavailable; retry shortly')
    }
    const status = err.statusCode ?? 500
    if (status >= 400 && status < 500) {
      const kind = clientKind(err)
      if (kind === 'bodyTooLarge') reply.header('connection', 'close')
      return sendError(reply, kind, MESSAGES[kind] ?? err.message)
    }
    request.log.error({ err }, 'unhandled error')
    return sendError(reply, 'internal', 'internal server error')
  })
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, 'routeNotFound', `no route for ${request.method} ${request.url.split('?')[0]}`),
  )
}
