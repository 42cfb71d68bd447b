import type { Storage } from '../storage/index.js'
import { mintToken } from './issue-token.js'

export const BOOTSTRAP_ACCOUNT = 'default'

/**
 * On a store with no tokens at all, creates one for account `default` with
 * every scope: the given secret when set, else a new one. Returns the secret
 * when it was generated here (so it can be shown once), else undefined.
 * Atomic in the store: of several instances starting at once on an empty store, one creates it.
 */
export async function bootstrapToken(storage: Storage, seeded?: string): Promise<string | undefined> {
  const { secret, record } = mintToken({
    accountName: BOOTSTRAP_ACCOUNT,
    label: seeded === undefined ? 'bootstrap' : 'bootstrap (PLANTSTORE_BOOTSTRAP_TOKEN)',
    secret: seeded,
  })
  const created = await storage.tokens.createFirst(record)
  return created !== undefined && seeded === undefined ? secret : undefined
}
