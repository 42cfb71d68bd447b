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
      description: 'With 42901: seconds until the limit resets; with 42903: seconds to wait before reconnecting',
    }),
  },
  503: { 'Retry-After': Type.Integer({ description: 'Seconds to wait before retrying' }) },
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
  for (const [status, list] of byStatus) {
    const values = list.map((kind) => `${ErrorCatalogue[kind].error}: ${ErrorCatalogue[kind].summary}`)
    const description = `Error. \`error\` is one of: ${values.join('; ')}`
    responses[status] = Type.Ref(ErrorBody, { description, ...(HEADERS[status] && { headers: HEADERS[status] }) })
  }
  return responses
}
