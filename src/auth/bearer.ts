import type { FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import type { AccountDirectory } from './accounts.js'
import type { Caller } from './caller.js'
import type { JwtCheck, JwtClaims, JwtVerifier } from './jwt.js'
import { looksLikeJwt } from './jwt-shapes.js'
import { TOKEN_PREFIX } from './tokens.js'
import type { TokenCheck, TokenVerifier } from './token-cache.js'

export const REALM = 'plantstore'

/** Why a request was refused authentication; `metrics`: a wrong PLANTSTORE_METRICS_TOKEN on GET /metrics. */
export type AuthFailure = 'missing' | 'malformed' | 'unknown' | 'expired' | 'revoked' | 'insufficient_scope' | 'metrics'

/** JWT access tokens from the operator's identity provider, when configured. */
export interface JwtAuth {
  verifier: JwtVerifier
  accounts: AccountDirectory
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

function tokenCaller(check: TokenCheck & { ok: true }): Caller {
  const { token } = check
  return {
    accountId: token.accountId,
    accountName: token.accountName,
    tokenId: token.id,
    scopes: token.scopes,
    expiresAt: token.expiresAt?.getTime() ?? null,
  }
}

/**
 * Finds who is calling from the request's bearer token: one of the service's own tokens or, with `jwt`, a JWT from
 * the operator's identity provider (a bearer in JWS compact form that does not start with `pst_`; a seeded
 * PLANTSTORE_BOOTSTRAP_TOKEN may look like neither). Answers at once for a token in the cache; waits only for what is
 * not at hand. Refusals are thrown as 401s (`missingToken` for no token at all, `invalidToken` otherwise), each
 * reported to `onRefused` first.
 */
export class Authenticator {
  readonly #verifier: TokenVerifier
  readonly #onRefused: (reason: AuthFailure) => void
  readonly #jwt: JwtAuth | undefined

  constructor(verifier: TokenVerifier, onRefused: (reason: AuthFailure) => void, jwt?: JwtAuth) {
    this.#verifier = verifier
    this.#onRefused = onRefused
    this.#jwt = jwt
  }

  authenticate(request: FastifyRequest): Caller | Promise<Caller> {
    let secret: string
    try {
      secret = bearerSecret(request)
    } catch (err) {
      this.#onRefused((err as ApiError).kind === 'missingToken' ? 'missing' : 'malformed')
      throw err
    }
    const jwt = this.#jwt
    if (jwt !== undefined && !secret.startsWith(TOKEN_PREFIX) && looksLikeJwt(secret)) {
      const known = jwt.verifier.cached(secret)
      if (known !== undefined) return this.#admitJwt(request, known, jwt.accounts)
      return jwt.verifier.verify(secret).then((check) => this.#admitJwt(request, check, jwt.accounts))
    }
    const cached = this.#verifier.cached(secret)
    if (cached !== undefined) return this.#admit(cached)
    return this.#verifier.verify(secret).then((check) => this.#admit(check))
  }

  /** The 403 for a caller without `scope`, reported; undefined when the caller holds it. */
  lacking(caller: Caller, scope: string): ApiError | undefined {
    if (caller.scopes.includes(scope)) return undefined
    this.#onRefused('insufficient_scope')
    return insufficientScope(scope, `token lacks the scope ${scope} this operation needs`)
  }

  #admit(check: TokenCheck): Caller {
    if (check.ok) return tokenCaller(check)
    this.#onRefused(check.reason)
    throw invalidToken(REFUSALS[check.reason])
  }

  #admitJwt(request: FastifyRequest, check: JwtCheck, accounts: AccountDirectory): Caller | Promise<Caller> {
    if (!check.ok) {
      this.#onRefused(check.reason)
      // Why, for the operator; the client learns only that the token is not valid.
      request.log.info({ reason: check.detail }, 'JWT refused')
      throw invalidToken(REFUSALS[check.reason])
    }
    const { claims } = check
    const known = accounts.known(claims.account)
    if (known !== undefined) return jwtCaller(known, claims)
    return accounts.resolve(claims.account).then((id) => jwtCaller(id, claims))
  }
}
