import type { FastifyInstance } from 'fastify'
import type { Scope } from './tokens.js'

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
 * Gives every request a `caller`, null until the caller gate (plugins/caller-gate.ts) sets it. Call it before any
 * route or plugin is registered: a plugin registered earlier (the docs) would otherwise see requests without the
 * property at all.
 */
export function declareCaller(app: FastifyInstance): void {
  app.decorateRequest('caller', null)
}

/** The caller of a route that declares a scope; such a route is never reached unauthenticated. */
export function callerOf(request: { caller: Caller | null }): Caller {
  if (request.caller === null) throw new Error('route reached without authentication')
  return request.caller
}
