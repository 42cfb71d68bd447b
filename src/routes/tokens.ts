import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { insufficientScope, invalidToken } from '../auth/bearer.js'
import { callerOf, type Caller } from '../auth/caller.js'
import { issueToken } from '../auth/issue-token.js'
import { TOKEN_ID_PREFIX } from '../auth/tokens.js'
import { ApiError } from '../errors.js'
import {
  CreatedToken,
  DEFAULT_TOKEN_LIFETIME_DAYS,
  MAX_TOKEN_LIFETIME_DAYS,
  NewTokenBody,
  TOKEN_EXAMPLE,
  TokenParams,
  TokenShape,
} from '../schemas/token.js'
import { LINEAGE_DEPTH, MakerEndedError, type TokenRecord, type TokenStore } from '../storage/index.js'
import { refuseIdempotencyKey } from '../plugins/idempotency.js'
import { creationErrorResponses, errorResponses, withExamples } from './error-responses.js'
import { SECURITY } from './security.js'

const tags = ['tokens']
const DAY_MS = 86_400_000

function shape(token: TokenRecord) {
  return {
    id: token.id,
    scopes: token.scopes,
    label: token.label,
    createdAt: token.createdAt.toISOString(),
    expiresAt: token.expiresAt?.toISOString() ?? null,
    revokedAt: token.revokedAt?.toISOString() ?? null,
    createdBy: token.createdBy,
  }
}

/**
 * The maker a new token records: the calling token, when it is one of the service's own. A JWT caller is no stored
 * token (its tokenId is `jwt:...`), so what it makes has no maker: it lives on its own, as one made with the CLI.
 */
function makerOf(caller: Caller): string | null {
  return caller.tokenId.startsWith(TOKEN_ID_PREFIX) ? caller.tokenId : null
}

/**
 * The expiry asked for, or the default; 400 unless in the future, within the longest lifetime, and no later than
 * the calling token's own: a token never outlives the one that made it, so a leaked short-lived token (a JWT of a
 * few minutes, say) cannot be turned into a lasting one.
 */
function expiryOf(expiresAt: string | undefined, caller: Caller, now: number): Date {
  const longest = now + MAX_TOKEN_LIFETIME_DAYS * DAY_MS
  const latest = Math.min(longest, caller.expiresAt ?? Infinity)
  if (expiresAt === undefined) return new Date(Math.min(now + DEFAULT_TOKEN_LIFETIME_DAYS * DAY_MS, latest))
  const when = Date.parse(expiresAt)
  if (!(when > now && when <= longest)) {
    throw new ApiError('validation', `body.expiresAt: must be in the future, within ${MAX_TOKEN_LIFETIME_DAYS} days`)
  }
  if (when > latest) {
    throw new ApiError(
      'validation',
      `body.expiresAt: must not be after the calling token expires (${new Date(latest).toISOString()})`,
    )
  }
  return new Date(when)
}

/**
 * 403 when `scopes` hold one the caller lacks: a token may neither make nor delete a token that can do more than it
 * can. `lacks` words the message for the scope found.
 */
function requireOwnScopes(scopes: readonly string[], caller: Caller, lacks: (scope: string) => string): void {
  const lacking = scopes.find((scope) => !caller.scopes.includes(scope))
  if (lacking !== undefined) throw insufficientScope(lacking, lacks(lacking))
}

/** POST /tokens, GET /tokens, DELETE /tokens/{id}: the caller account's own tokens, for callers with tokens:manage. */
export const tokenRoutes: FastifyPluginAsyncTypebox<{ tokens: TokenStore; quota: number; trustedMs: number }> = async (
  app,
  { tokens, quota, trustedMs },
) => {
  app.post(
    '/tokens',
    {
      config: { scope: 'tokens:manage' },
      // A replay would have to keep the secret, which is stored only as a hash, in the clear.
      preHandler: refuseIdempotencyKey(
        "a token's secret is never kept, so its answer cannot be replayed; list tokens to find one made by a request whose answer was lost",
      ),
      schema: {
        operationId: 'createToken',
        tags,
        summary: 'Make a token for your own account',
        description: `A token of the caller's account with at most the caller's own scopes (403 for one it lacks), which works at once. The answer holds the secret, shown only this once. The new token records the calling token as its maker (\`createdBy\`) and ends with it: revoking or deleting the calling token, or its expiry, ends the tokens it made, and theirs in turn, within ${trustedMs / 1000} seconds; a calling token revoked or deleted meanwhile gets 401 at once. A token made by a calling token already ${LINEAGE_DEPTH} makers away from a token made otherwise (the CLI, a first start, a JWT) is stored, and counts for the quota until deleted, but never works: authentication refuses a lineage longer than ${LINEAGE_DEPTH} (401). An account holding ${quota} tokens not revoked gets 409 (40902). \`Idempotency-Key\` is refused (400): the secret is kept only as a hash, so no answer could be replayed; a client whose answer was lost lists its tokens (the label tells) and deletes the one it cannot use.`,
        security: SECURITY,
        body: NewTokenBody,
        response: {
          201: { ...CreatedToken, description: 'Made; keep the secret' },
          ...creationErrorResponses('quotaExceeded'),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request)
      requireOwnScopes(
        request.body.scopes,
        caller,
        (scope) => `a token can only be given scopes the calling token has; it lacks ${scope}`,
      )
      const issued = issueToken(
        { tokens },
        {
          accountName: caller.accountName,
          scopes: request.body.scopes,
          label: request.body.label ?? null,
          expiresAt: expiryOf(request.body.expiresAt, caller, Date.now()),
          createdBy: makerOf(caller),
        },
        quota,
      )
      // The calling token was revoked or deleted after this instance last read it (it trusts it for a moment).
      const { secret, token } = await issued.catch((err: unknown) => {
        throw err instanceof MakerEndedError ? invalidToken('bearer token has been revoked') : err
      })
      return reply.code(201).send({ ...shape(token), secret })
    },
  )

  app.get(
    '/tokens',
    {
      config: { scope: 'tokens:manage' },
      schema: {
        operationId: 'listTokens',
        tags,
        summary: "List your account's tokens",
        description: "The caller's account's tokens that are not revoked, oldest first; never their secrets.",
        security: SECURITY,
        response: {
          200: withExamples(
            Type.Array(Type.Ref(TokenShape)),
            { one: { summary: 'One token', value: [TOKEN_EXAMPLE] } },
            { description: 'Tokens' },
          ),
          ...errorResponses('unavailable'),
        },
      },
    },
    async (request) =>
      (await tokens.list(callerOf(request).accountName)).filter((token) => token.revokedAt === null).map(shape),
  )

  app.delete(
    '/tokens/:id',
    {
      config: { scope: 'tokens:manage' },
      schema: {
        operationId: 'deleteToken',
        tags,
        summary: 'Delete one of your tokens',
        description: `The token stops working within ${trustedMs / 1000} seconds on every instance (the time a verified token is trusted without asking the database again), and so does every token it made, and theirs in turn: they are kept, revoked. 404 when the account has no such token; 403 for one with a scope the caller lacks.`,
        security: SECURITY,
        params: TokenParams,
        response: {
          204: Type.Null({ description: 'Token deleted' }),
          ...errorResponses('validation', 'tokenNotFound', 'unavailable'),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params
      const caller = callerOf(request)
      const notFound = new ApiError('tokenNotFound', `no token with id ${id}`)
      const target = (await tokens.list(caller.accountName)).find((token) => token.id === id)
      if (target === undefined) throw notFound
      requireOwnScopes(
        target.scopes,
        caller,
        (scope) => `token ${id} has the scope ${scope}, which the calling token lacks`,
      )
      // Removed meanwhile by another request: the same 404.
      if (!(await tokens.remove(id, caller.accountId))) throw notFound
      return reply.code(204).send(null)
    },
  )
}
