import { errors, jwtVerify, type JWTPayload, type JWTVerifyOptions, type JWTVerifyResult } from 'jose'
import type { KeySet } from './jwks.js'
import { SCOPES, type Scope } from './tokens.js'

/** How JWT access tokens are checked (RFC 9068, RFC 8725). */
export interface JwtOptions {
  issuer: string
  audience: string
  /** The claim naming the account. */
  accountClaim: string
  /** Asymmetric algorithms only; the settings refuse `none` and HMAC. */
  algorithms: string[]
  clockToleranceSeconds: number
}

/** What a verified JWT says about its caller. */
export interface JwtClaims {
  account: string
  /** Who within the account: `sub`, else the account; rate limits count per subject. */
  subject: string
  scopes: Scope[]
  /** When it expires, ms since the epoch. */
  expiresAt: number
}

/** The outcome of checking a JWT; `detail` (jose's error code) is for the operator's log, never the client. */
export type JwtCheck = { ok: true; claims: JwtClaims } | { ok: false; reason: 'unknown' | 'expired'; detail: string }

// An account name from a claim: visible characters only (it is logged and shown by the CLI), as long as a sub may be.
// No lone surrogate either: PostgreSQL would store it as U+FFFD, making two names one account. Nor private-use or
// unassigned code points, which no terminal shows as what they are.
const ACCOUNT_VALUE = /^[^\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Z}]{1,255}$/u
// Keys a token without a distinguishing kid is tried against (a set that publishes several of one type, say).
const MAX_CANDIDATES = 5
// RFC 9068 §2.1 names at+jwt; many providers still send JWT. Media types compare without case or "application/".
const TYPES = new Set(['at+jwt', 'jwt'])
const CACHE_TTL_MS = 60_000
const MAX_CACHED = 1000

/** The granted scopes this service knows: `scope` (space-delimited) or `scp` (an array, or Entra ID's string). */
function scopesOf(payload: JWTPayload): Scope[] {
  const granted = payload.scope ?? payload.scp
  const names = typeof granted === 'string' ? granted.split(' ') : Array.isArray(granted) ? granted : []
  return SCOPES.filter((scope) => names.includes(scope))
}

class Refused extends Error {
  readonly code = 'ERR_PLANTSTORE_CLAIM'
}

/** The claims, or Refused: RFC 9068's `typ`, an `iat` not in the future, an account claim that names one. */
function claimsOf(payload: JWTPayload, typ: string | undefined, options: JwtOptions, now: number): JwtClaims {
  const type = typ?.toLowerCase().replace(/^application\//, '')
  if (type === undefined || !TYPES.has(type)) throw new Refused('typ is not at+jwt or JWT')
  if (payload.iat !== undefined && payload.iat * 1000 > now + options.clockToleranceSeconds * 1000) {
    throw new Refused('iat is in the future')
  }
  const account = payload[options.accountClaim]
  if (typeof account !== 'string' || !ACCOUNT_VALUE.test(account)) throw new Refused('no usable account claim')
  const subject = typeof payload.sub === 'string' && ACCOUNT_VALUE.test(payload.sub) ? payload.sub : account
  return { account, subject, scopes: scopesOf(payload), expiresAt: payload.exp! * 1000 }
}

/**
 * Verifies JWT access tokens from the configured issuer: a signature by one of its keys with an allowed algorithm,
 * `iss` and `aud` exact, `exp` required, `nbf` and `iat` within the clock tolerance, `typ` at+jwt or JWT. A token
 * that passed is trusted again without verifying for up to a minute (never past its `exp`): the signature check costs
 * more than the rest of a request.
 */
export class JwtVerifier {
  readonly #options: JwtOptions
  readonly #keys: KeySet
  readonly #verified = new Map<string, { claims: JwtClaims; until: number }>()

  constructor(options: JwtOptions, keys: KeySet) {
    this.#options = options
    this.#keys = keys
  }

  /** The check of a token verified within the minute, known without waiting; undefined when it must be verified. */
  cached(token: string, now = Date.now()): JwtCheck | undefined {
    const entry = this.#verified.get(token)
    if (entry === undefined) return undefined
    if (now < entry.until) return { ok: true, claims: entry.claims }
    this.#verified.delete(token)
    return undefined
  }

  async verify(token: string, now = Date.now()): Promise<JwtCheck> {
    const options = this.#options
    try {
      const { payload, protectedHeader } = await this.#verify(token, {
        issuer: options.issuer,
        audience: options.audience,
        algorithms: options.algorithms,
        clockTolerance: options.clockToleranceSeconds,
        requiredClaims: ['exp'],
        currentDate: new Date(now),
      })
      const claims = claimsOf(payload, protectedHeader.typ, options, now)
      this.#remember(token, claims, now)
      return { ok: true, claims }
    } catch (err) {
      const detail = (err as { code?: unknown }).code
      return {
        ok: false,
        reason: err instanceof errors.JWTExpired ? 'expired' : 'unknown',
        detail: typeof detail === 'string' ? detail : 'ERR_JWT_INVALID',
      }
    }
  }

  /**
   * jose's verification; where several keys of the set fit the token (no kid, or one kid published twice during a
   * rotation), each is tried in turn, a few at most, rather than refusing a token one of them signed.
   */
  async #verify(token: string, options: JWTVerifyOptions): Promise<JWTVerifyResult> {
    try {
      return await jwtVerify(token, this.#keys.getKey, options)
    } catch (err) {
      if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err
      let tried = 0
      for await (const key of err) {
        if (++tried > MAX_CANDIDATES) break
        try {
          return await jwtVerify(token, key, options)
        } catch (failed) {
          if (!(failed instanceof errors.JWSSignatureVerificationFailed)) throw failed
        }
      }
      throw err
    }
  }

  #remember(token: string, claims: JwtClaims, now: number): void {
    if (this.#verified.size >= MAX_CACHED) this.#verified.delete(this.#verified.keys().next().value!)
    this.#verified.set(token, { claims, until: Math.min(claims.expiresAt, now + CACHE_TTL_MS) })
  }
}
