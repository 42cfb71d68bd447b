import type { Storage } from '../storage/index.js'
import type { TokenRecord } from '../storage/types.js'
import { hashSecret, newTokenId, newTokenSecret, SCOPES } from './tokens.js'

/** What a new token is for; every field but the account has a default. */
export interface TokenRequest {
  accountName: string
  /** Both scopes when not given. */
  scopes?: readonly string[]
  label?: string | null
  expiresAt?: Date | null
  /** A caller-chosen secret (PLANTSTORE_BOOTSTRAP_TOKEN); a fresh random one otherwise. */
  secret?: string
}

/** Creates a token, storing only its hash, and returns the secret with the stored record. */
export async function issueToken(
  storage: Storage,
  request: TokenRequest,
): Promise<{ secret: string; token: TokenRecord }> {
  const secret = request.secret ?? newTokenSecret()
  const token = await storage.createToken({
    id: newTokenId(),
    accountName: request.accountName,
    secretHash: hashSecret(secret),
    scopes: [...new Set(request.scopes ?? SCOPES)],
    label: request.label ?? null,
    expiresAt: request.expiresAt ?? null,
  })
  return { secret, token }
}
