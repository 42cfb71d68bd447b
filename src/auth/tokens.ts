import { createHash, randomBytes } from 'node:crypto'

export const TOKEN_PREFIX = 'pst_'
/** What every token id starts with; a JWT caller's id (`jwt:` and its subject) does not. */
export const TOKEN_ID_PREFIX = 'tok_'
export const SCOPES = ['plants:read', 'plants:write', 'webhooks:manage', 'tokens:manage'] as const
export type Scope = (typeof SCOPES)[number]
/** What a token may do when no scope is asked for: the plants, not the webhooks (least privilege). */
export const DEFAULT_SCOPES: readonly Scope[] = ['plants:read', 'plants:write']

/** A new secret: the prefix (so secret scanners can spot leaks) and 32 random bytes, base64url. */
export function newTokenSecret(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url')
}

/** A new public token id, safe to print and log. */
export function newTokenId(): string {
  return TOKEN_ID_PREFIX + randomBytes(8).toString('hex')
}

// Secrets carry 256 bits of entropy, so a fast hash is enough: there is nothing to brute-force.
/** The hash stored in place of a secret. */
export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest()
}

/** Parses durations like 30d, 12h, 15m, 90s into milliseconds. */
export function parseDuration(text: string): number | undefined {
  const match = /^([1-9][0-9]{0,5})([smhd])$/.exec(text)
  if (match === null) return undefined
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd']
  return Number(match[1]) * unit
}
