import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import type { AccountDirectory } from './accounts.js'
import type { JwtCheck, JwtClaims, JwtVerifier } from './jwt.js'
import { looksLikeJwt } from './jwt-shapes.js'
import { TOKEN_PREFIX, type Scope } from './tokens.js'
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
  /**
   * The token's id; for a JWT, `jwt:` and its subject, so that each subject is rate-limited on its own. A subject is
   * unique only within its account: rate limits key it with `accountId`.
   */
  tokenId: string
  scopes: string[]
  /** When the presented token stops working (ms since the epoch); null for a token without expiry. */
  expiresAt: number | null
}

/** JWT access tokens from the operator's identity provider, when configured. */
export interface JwtAuth {
  verifier: JwtVerifier
  accounts: AccountDirectory
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

/**
 * Gives every request a `caller`, null until bearer authentication sets it. Call it before any route or plugin is
 * registered: a plugin registered earlier (the docs) would otherwise see requests without the property at all.
 */
export function declareCaller(app: FastifyInstance): void {
  app.decorateRequest('caller', null)
}

/** The caller of a route that declares a scope; such a route is never reached unauthenticated. */
export function callerOf(request: { caller: Caller | null }): Caller {
  if (request.caller === null) throw new Error('route reached without authentication')
  return request.caller
}

// RFC 6750 b64token, bounded so a huge header costs little to hash; 12 KiB holds a provider's JWT with hundreds of
// groups or roles, under the 16 KiB limit on a request's head.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]{1,12288}=*) *$/i

function challenge(params: string = ''): Record<string, string> {
  return { 'www-authenticate': `Bearer realm="${REALM}"${params}` }
}

/** 403 with the RFC 6750 challenge naming the scope that was missing. */
export function insufficientScope(scope: string, message: string): ApiError {
  return new ApiError('insufficientScope', message, challenge(`, error="insufficient_scope", scope="${scope}"`))
}

/** 401 invalid_token with the RFC 6750 challenge. */
export function invalidToken(message: string): ApiError {
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

function jwtCaller(accountId: number, claims: JwtClaims): Caller {
  return {
    accountId,
    accountName: claims.account,
    tokenId: `jwt:${claims.subject}`,
    scopes: claims.scopes,
    expiresAt: claims.expiresAt,
  }
}

const REFUSALS = {
  unknown: 'bearer token is not valid',
  expired: 'bearer token has expired',
  revoked: 'bearer token has been revoked',
} as const

/**
 * Authenticates every route that declares a `scope` in its config, in onRequest:
 * before the body is read, so unauthenticated clients cannot make us parse anything.
 * With `jwt`, a bearer in JWS compact form that does not start with `pst_` is verified as a JWT; anything else is
 * looked up as one of the service's own tokens (a seeded PLANTSTORE_BOOTSTRAP_TOKEN may look like neither).
 */
export function registerBearerAuth(
  app: FastifyInstance,
  verifier: TokenVerifier,
  onRefused: (reason: AuthFailure) => void = () => {},
  throttle?: AuthThrottle,
  jwt?: JwtAuth,
): void {
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
      expiresAt: token.expiresAt?.getTime() ?? null,
    }
    return undefined
  }
  const admitJwt = (request: FastifyRequest, check: JwtCheck, accounts: AccountDirectory) => {
    if (!check.ok) {
      onRefused(check.reason)
      // Why, for the operator; the client learns only that the token is not valid.
      request.log.info({ reason: check.detail }, 'JWT refused')
      return refuse(request, invalidToken(REFUSALS[check.reason]))
    }
    const { claims } = check
    const known = accounts.known(claims.account)
    if (known !== undefined) return void (request.caller = jwtCaller(known, claims))
    return accounts.resolve(claims.account).then((id) => void (request.caller = jwtCaller(id, claims)))
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
    if (jwt !== undefined && !secret.startsWith(TOKEN_PREFIX) && looksLikeJwt(secret)) {
      const { verifier: jwts, accounts } = jwt
      const known = jwts.cached(secret)
      if (known !== undefined) return admitJwt(request, known, accounts)
      return jwts.verify(secret).then((check) => admitJwt(request, check, accounts))
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
    done(insufficientScope(scope, `token lacks the scope ${scope} this operation needs`))
  })
}
