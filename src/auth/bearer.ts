import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import type { Scope } from './tokens.js'
import type { TokenCheck, TokenVerifier } from './token-cache.js'

export const REALM = 'plantstore'

/** Slows down clients that keep failing authentication. */
export interface AuthThrottle {
  /**
   * Refuses (429) a client that may not try again yet: throws at once when the count is at hand (kept in this
   * process), else returns a promise that rejects; undefined when the client may go on at once.
   */
  check(request: FastifyRequest): Promise<void> | undefined
  /** Records a refused token; throws (429) when that attempt crossed the limit. */
  refused(request: FastifyRequest): Promise<void>
}

/** Why a request was refused authentication; `metrics`: a wrong PLANTSTORE_METRICS_TOKEN on GET /metrics. */
export type AuthFailure = 'missing' | 'malformed' | 'unknown' | 'expired' | 'revoked' | 'insufficient_scope' | 'metrics'

/** Who is calling: the account and token behind a verified bearer token. */
export interface Caller {
  accountId: number
  accountName: string
  tokenId: string
  scopes: string[]
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null
  }
  interface FastifyContextConfig {
    /** The scope a route needs; routes without one are public. */
    scope?: Scope
  }
}

/** The caller of a route that declares a scope; such a route is never reached unauthenticated. */
export function callerOf(request: { caller: Caller | null }): Caller {
  if (request.caller === null) throw new Error('route reached without authentication')
  return request.caller
}

// RFC 6750 b64token, bounded so a huge header costs nothing to hash.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]{1,512}=*) *$/i

function challenge(params: string = ''): Record<string, string> {
  return { 'www-authenticate': `Bearer realm="${REALM}"${params}` }
}

function invalidToken(message: string): ApiError {
  return new ApiError('invalidToken', message, challenge(', error="invalid_token"'))
}

/** Extracts the bearer secret, or throws the 401 the header deserves. */
function bearerSecret(request: FastifyRequest): string {
  const header = request.headers.authorization
  if (header === undefined || header === '') {
    throw new ApiError('missingToken', 'Authorization header with a Bearer token is required', challenge())
  }
  if (!/^Bearer(\s|$)/i.test(header)) {
    throw new ApiError('missingToken', 'Authorization header must use the Bearer scheme', challenge())
  }
  const match = BEARER.exec(header)
  if (match?.[1] === undefined) throw invalidToken('Authorization header holds a malformed Bearer token')
  return match[1]
}

const REFUSALS = {
  unknown: 'bearer token is not valid',
  expired: 'bearer token has expired',
  revoked: 'bearer token has been revoked',
} as const

/**
 * Authenticates every route that declares a `scope` in its config, in onRequest:
 * before the body is read, so unauthenticated clients cannot make us parse anything.
 */
export function registerBearerAuth(
  app: FastifyInstance,
  verifier: TokenVerifier,
  onRefused: (reason: AuthFailure) => void = () => {},
  throttle?: AuthThrottle,
): void {
  app.decorateRequest('caller', null)
  const refuse = (request: FastifyRequest, err: ApiError) => {
    if (throttle === undefined) throw err
    return throttle.refused(request).then(() => {
      throw err
    })
  }
  const admit = (request: FastifyRequest, check: TokenCheck) => {
    if (!check.ok) {
      onRefused(check.reason)
      return refuse(request, invalidToken(REFUSALS[check.reason]))
    }
    const { token } = check
    request.caller = {
      accountId: token.accountId,
      accountName: token.accountName,
      tokenId: token.id,
      scopes: token.scopes,
    }
    return undefined
  }
  /** Sets request.caller or throws the refusal; waits only for what is not at hand (a token not in the cache). */
  const authenticate = (request: FastifyRequest): Promise<void> | undefined => {
    let secret: string
    try {
      secret = bearerSecret(request)
    } catch (err) {
      const missing = (err as ApiError).kind === 'missingToken'
      onRefused(missing ? 'missing' : 'malformed')
      // Sending no token is not guessing one; a malformed one counts.
      if (missing) throw err
      return refuse(request, err as ApiError)
    }
    const cached = verifier.cached(secret)
    if (cached !== undefined) return admit(request, cached)
    return verifier.verify(secret).then((check) => admit(request, check))
  }
  // Callback style, and no promise at all for a token in the cache: most requests wait for nothing here.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.routeOptions.config.scope === undefined) return done()
    let pending: Promise<void> | undefined
    try {
      const gate = throttle?.check(request)
      pending = gate === undefined ? authenticate(request) : gate.then(() => authenticate(request))
    } catch (err) {
      return done(err as Error)
    }
    if (pending === undefined) done()
    else pending.then(() => done(), done)
  })
  // After the rate limit (so a 403 is counted and carries RateLimit headers), before the body is read.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const scope = request.routeOptions.config.scope
    if (scope === undefined || request.caller === null || request.caller.scopes.includes(scope)) {
      return done(null, payload)
    }
    onRefused('insufficient_scope')
    done(
      new ApiError(
        'insufficientScope',
        `token lacks the scope ${scope} this operation needs`,
        challenge(`, error="insufficient_scope", scope="${scope}"`),
      ),
    )
  })
}
