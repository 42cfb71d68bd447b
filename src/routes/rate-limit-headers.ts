/**
 * The rate-limit fields every answer to an accepted token carries (draft-ietf-httpapi-ratelimit-headers-11), as
 * OpenAPI header objects. Not in each route's schema: they follow from authentication, as the security requirement
 * does, so the document adds them to every response of every operation that has one. Written out in each response
 * rather than referred to: generated clients (openapi-typescript) type a referred header as always sent, and these
 * are not when the operator turns the limits off.
 */
export const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': {
    description:
      'Per token and per account (each absent when turned off): `q` requests per `w` seconds, refilled continuously',
    schema: { type: 'string', examples: ['"token";q=100;w=1, "account";q=500;w=1'] },
  },
  RateLimit: {
    description:
      'What this request left of each policy: `r` requests, and `t` seconds until one more comes back (no `t` while the shared store is away)',
    schema: { type: 'string', examples: ['"token";r=99;t=1, "account";r=499;t=1'] },
  },
}

type Json = Record<string, unknown>
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null

/**
 * Adds the rate-limit headers to every response but the 401 of every operation that needs a token
 * (its own security requirement, else the document's, is not empty). `document` is the generated OpenAPI object.
 */
export function withRateLimitHeaders<D extends object>(document: D): D {
  const doc = document as Json
  const operations = Object.values(isObject(doc.paths) ? doc.paths : {})
    .filter(isObject)
    .flatMap((path) => Object.values(path).filter(isObject))
  for (const operation of operations) {
    const security = operation.security ?? doc.security
    if (!Array.isArray(security) || security.length === 0 || !isObject(operation.responses)) continue
    for (const [status, response] of Object.entries(operation.responses)) {
      if (status === '401' || !isObject(response) || '$ref' in response) continue
      response.headers = { ...(response.headers as Json), ...RATE_LIMIT_HEADERS }
    }
  }
  return document
}
