import { timingSafeEqual } from 'node:crypto'
import type { StoredToken, TokenRecord, TokenStore } from '../storage/index.js'
import { hashSecret } from './tokens.js'

/** Why a presented secret was refused. */
export type TokenRefusal = 'unknown' | 'expired' | 'revoked'

/** The outcome of checking a secret. */
export type TokenCheck = { ok: true; token: TokenRecord } | { ok: false; reason: TokenRefusal }

function checked(token: StoredToken | undefined, now: number): TokenCheck {
  if (token === undefined) return { ok: false, reason: 'unknown' }
  if (token.revokedAt !== null) return { ok: false, reason: 'revoked' }
  if (token.expiresAt !== null && token.expiresAt.getTime() <= now) return { ok: false, reason: 'expired' }
  return { ok: true, token }
}

interface Entry {
  token: StoredToken
  fetchedAt: number
}

/**
 * Resolves bearer secrets to tokens, caching hits for `ttlMs` so a request
 * does not cost a database round trip. A revocation made elsewhere (the CLI,
 * another instance) takes effect within `ttlMs`. Unknown secrets are not
 * cached, so a token created a moment ago works at once.
 *
 * The cache is keyed by the secret itself, so a hit costs no SHA-256 (a fifth of what authentication cost per
 * request). A miss is what a guess meets: V8 compares a stored key's characters only when its 32-bit string hash
 * (seeded per process) equals the guess's, so how much of a cached secret a guess matches does not show in its
 * timing; the database is then asked by the SHA-256 of the whole guess. Secrets stay in memory only, for `ttlMs`.
 */
export class TokenVerifier {
  readonly #tokens: TokenStore
  readonly #ttlMs: number
  readonly #maxEntries: number
  readonly #entries = new Map<string, Entry>()

  constructor(tokens: TokenStore, options: { ttlMs: number; maxEntries?: number }) {
    this.#tokens = tokens
    this.#ttlMs = options.ttlMs
    this.#maxEntries = options.maxEntries ?? 10_000
  }

  /** The check of a secret verified within `ttlMs`, known without waiting; undefined when it must be read. */
  cached(secret: string, now = Date.now()): TokenCheck | undefined {
    const cached = this.#entries.get(secret)
    return cached !== undefined && now - cached.fetchedAt < this.#ttlMs ? checked(cached.token, now) : undefined
  }

  async verify(secret: string, now = Date.now()): Promise<TokenCheck> {
    return this.cached(secret, now) ?? checked(await this.#fetch(secret, now), now)
  }

  async #fetch(secret: string, now: number): Promise<StoredToken | undefined> {
    const hash = hashSecret(secret)
    const token = await this.#tokens.find(hash)
    this.#entries.delete(secret)
    // The index found it by hash already; comparing again in constant time
    // keeps the decision itself free of data-dependent timing.
    if (token === undefined || !timingSafeEqual(token.secretHash, hash)) return undefined
    this.#remember(secret, { token, fetchedAt: now })
    return token
  }

  #remember(secret: string, entry: Entry): void {
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    this.#entries.set(secret, entry)
  }
}
