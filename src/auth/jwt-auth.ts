import type { FastifyBaseLogger } from 'fastify'
import type { TokenStore } from '../storage/index.js'
import { AccountDirectory } from './accounts.js'
import type { JwtAuth } from './bearer.js'
import { KeySet, type KeySetOptions } from './jwks.js'
import { JwtVerifier, type JwtOptions } from './jwt.js'

/** JWT access tokens as configured: what to check, and where the keys are. */
export interface JwtSettings extends JwtOptions {
  jwksUrl?: string
  /** How the key set is fetched; its defaults when not given (tests shorten the cooldown, or move its clock). */
  keys?: Pick<KeySetOptions, 'cooldownMs' | 'maxAgeMs' | 'timeoutMs' | 'now'>
}

/** The verifier and account directory bearer authentication uses for JWTs; an outage of the keys is logged once. */
export function createJwtAuth(
  settings: JwtSettings,
  tokens: Pick<TokenStore, 'accountId'>,
  log: FastifyBaseLogger,
): JwtAuth {
  const { jwksUrl, keys, ...options } = settings
  const keySet = new KeySet({
    issuer: options.issuer,
    jwksUrl,
    ...keys,
    onOutage: (err) =>
      log.warn(
        { reason: err instanceof Error ? err.message : String(err) },
        'the JWT signing keys cannot be fetched: tokens signed by keys already fetched still work, others get 401',
      ),
    onRecovery: () => log.info('the JWT signing keys can be fetched again'),
  })
  return { verifier: new JwtVerifier(options, keySet), accounts: new AccountDirectory(tokens) }
}
