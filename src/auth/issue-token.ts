import type { NewToken, Storage, TokenRecord } from '../storage/index.js'
import { DEFAULT_SCOPES, hashSecret, newTokenId, newTokenSecret } from './tokens.js'

/** What a new token is for; every field but the account has a default. */
export interface TokenRequest {
  accountName: string
  /** plants:read and plants:write when not given. */
  scopes?: readonly string[]
  label?: string | null
  expiresAt?: Date | null
  /** The id of the token making it (POST /tokens); none when made otherwise. */
  createdBy?: string | null
  /** A caller-chosen secret (PLANTSTORE_BOOTSTRAP_TOKEN); a fresh random one otherwise. */
  secret?: string
}

/** A fresh secret (unless the request brings one) and the token record to store, holding only its hash. */
export function mintToken(request: TokenRequest): { secret: string; record: NewToken } {
  const secret = request.secret ?? newTokenSecret()
  const record: NewToken = {
    id: newTokenId(),
    accountName: request.accountName,
    secretHash: hashSecret(secret),
    scopes: [...new Set(request.scopes ?? DEFAULT_SCOPES)],
    label: request.label ?? null,
    expiresAt: request.expiresAt ?? null,
    createdBy: request.createdBy ?? null,
  }
  return { secret, record }
}

/** Creates a token, storing only its hash, and returns the secret with the stored record; `quota` as TokenStore's. */
export async function issueToken(
  storage: Pick<Storage, 'tokens'>,
  request: TokenRequest,
  quota?: number,
): Promise<{ secret: string; token: TokenRecord }> {
  const { secret, record } = mintToken(request)
  return { secret, token: await storage.tokens.create(record, quota) }
}
