import { Type, type TSchema } from '@sinclair/typebox'
import { ErrorCatalogue, type ErrorKind } from '../errors.js'
import { ErrorBody } from '../schemas/error.js'

// Every authenticated route can refuse a caller: a head it will not guess at (no Host, a second Authorization), bad
// tokens, missing scope, the rate limits, the pipelining limit and the connection caps (refused before a request is
// read, so any route's caller may meet them).
const AUTHENTICATED: ErrorKind[] = [
  'malformedRequest',
  'duplicateHeader',
  'missingToken',
  'invalidToken',
  'insufficientScope',
  'rateLimited',
  'tooManyInFlight',
  'tooManyConnections',
  'atCapacity',
]

const challenge = { 'WWW-Authenticate': Type.String({ description: 'RFC 6750 Bearer challenge' }) }
const HEADERS: Record<number, Record<string, TSchema>> = {
  401: challenge,
  403: challenge,
  415: { 'Accept-Encoding': Type.String({ description: 'With 41502: `identity`, the only content coding accepted' }) },
  429: {
    'Retry-After': Type.Integer({
      description:
        'With 42901: seconds until the limit resets; with 42903: seconds to wait before reconnecting; with 42904 or 42905: seconds to wait before asking for the page again',
    }),
  },
  409: { 'Retry-After': Type.Integer({ description: 'With 40903: seconds to wait before retrying' }) },
  503: { 'Retry-After': Type.Integer({ description: 'Seconds to wait before retrying' }) },
}

type Examples = Record<string, { summary: string; value: unknown }>

/**
 * A response whose media type carries named examples beside the schema: Fastify's per-content-type form, which
 * @fastify/swagger copies as it is (examples beside a bare $ref it drops). Fastify serialises it as any other.
 */
export function withExamples(
  schema: TSchema,
  examples: Examples,
  response: { description: string; headers?: Record<string, TSchema> },
): TSchema {
  return { ...response, content: { 'application/json': { schema, examples } } } as unknown as TSchema
}

/** One named example per catalogue entry. */
function errorExamples(kinds: ErrorKind[]): Examples {
  return Object.fromEntries(
    kinds.map((kind) => {
      const { error, summary, example } = ErrorCatalogue[kind]
      return [kind, { summary: `${error}: ${summary}`, value: { error, message: example } }]
    }),
  )
}

/** The response for one status that answers with the given error kinds, each described, each with an example. */
export function errorResponse(kinds: ErrorKind[], description: string, headers?: Record<string, TSchema>): TSchema {
  const values = kinds.map((kind) => `${ErrorCatalogue[kind].error}: ${ErrorCatalogue[kind].summary}`)
  return withExamples(Type.Ref(ErrorBody), errorExamples(kinds), {
    description: `${description} \`error\` is one of: ${values.join('; ')}`,
    ...(headers && { headers }),
  })
}

/**
 * Response schemas for the given error kinds (plus auth failures, rate limits, the internal
 * error and shutting down), one per status, each describing its catalogue values.
 */
export function errorResponses(...kinds: ErrorKind[]): Record<number, TSchema> {
  const byStatus = new Map<number, ErrorKind[]>()
  for (const kind of [...kinds, ...AUTHENTICATED, 'internal' as const, 'shuttingDown' as const]) {
    const { status } = ErrorCatalogue[kind]
    const list = byStatus.get(status) ?? []
    if (!list.includes(kind)) list.push(kind)
    byStatus.set(status, list)
  }
  const responses: Record<number, TSchema> = {}
  for (const [status, list] of byStatus) responses[status] = errorResponse(list, 'Error.', HEADERS[status])
  return responses
}

/**
 * The errors of a route that creates something from a JSON body, with `kinds` of its own (its conflicts, quotas).
 * Those that take an Idempotency-Key add idempotencyKeyInUse and idempotencyKeyReused.
 */
export function creationErrorResponses(...kinds: ErrorKind[]): Record<number, TSchema> {
  return errorResponses(
    'validation',
    'malformedJson',
    ...kinds,
    'bodyTooLarge',
    'unsupportedMediaType',
    'unsupportedEncoding',
    'unavailable',
  )
}
