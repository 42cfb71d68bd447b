import type { Storage } from '../storage/index.js'
import { issueToken } from './issue-token.js'

export const BOOTSTRAP_ACCOUNT = 'default'

/**
 * On a store with no tokens at all, creates one for account `default` with
 * every scope: the given secret when set, else a new one. Returns the secret
 * when it was generated here (so it can be shown once), else undefined.
 */
export async function bootstrapToken(storage: Storage, seeded?: string): Promise<string | undefined> {
  if ((await storage.countTokens()) > 0) return undefined
  const { secret } = await issueToken(storage, {
    accountName: BOOTSTRAP_ACCOUNT,
    label: seeded === undefined ? 'bootstrap' : 'bootstrap (PLANTSTORE_BOOTSTRAP_TOKEN)',
    secret: seeded,
  })
  return seeded === undefined ? secret : undefined
}
