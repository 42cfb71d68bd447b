import { Type, type Static } from '@sinclair/typebox'
import { SCOPES, TOKEN_ID_PREFIX } from '../auth/tokens.js'
import { CONTROL_FREE_TEXT } from '../text-rules.js'
import { Text } from './text.js'

/** The longest a token made over HTTP may live: a year. */
export const MAX_TOKEN_LIFETIME_DAYS = 366
/** How long one lives when the request names no expiry. */
export const DEFAULT_TOKEN_LIFETIME_DAYS = 90

const ID_PATTERN = `^${TOKEN_ID_PREFIX}[0-9a-f]{16}$`
const id = Type.String({ pattern: ID_PATTERN, description: 'Token id: public, safe to log' })
const scopes = Type.Array(Type.Union(SCOPES.map((scope) => Type.Literal(scope))), {
  minItems: 1,
  uniqueItems: true,
  description: "What the token may do; at most the calling token's own scopes",
})
// The CLI prints labels in a terminal, so they may carry no control character.
const label = Text(
  { minLength: 1, maxLength: 100, description: 'A note saying what the token is for' },
  CONTROL_FREE_TEXT,
)
const time = (description: string) => Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description })

/** What a client sends to make a token for its own account. */
export const NewTokenBody = Type.Object(
  {
    scopes,
    label: Type.Optional(label),
    expiresAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description: `When it stops working: in the future, within ${MAX_TOKEN_LIFETIME_DAYS} days; ${DEFAULT_TOKEN_LIFETIME_DAYS} days from now when absent`,
      }),
    ),
  },
  {
    title: 'NewToken',
    additionalProperties: false,
    examples: [{ scopes: ['plants:read'], label: 'dashboard', expiresAt: '2027-02-23T09:30:00Z' }],
  },
)
export type NewTokenBody = Static<typeof NewTokenBody>

/** A token as the examples of the OpenAPI document show it. */
export const TOKEN_EXAMPLE = {
  id: 'tok_0123456789abcdef',
  scopes: ['plants:read'],
  label: 'dashboard',
  createdAt: '2026-11-25T09:30:00.000Z',
  expiresAt: '2027-02-23T09:30:00.000Z',
  revokedAt: null,
  createdBy: 'tok_fedcba9876543210',
}

const fields = {
  id,
  scopes: Type.Array(Type.String(), { description: 'What the token may do' }),
  label: Type.Union([Type.String(), Type.Null()], { description: 'What it is for; null when not given' }),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: time('When it stops working; null for a token without expiry (made with the CLI)'),
  revokedAt: time('When it was revoked; null while not revoked'),
  createdBy: Type.Union([Type.String({ pattern: ID_PATTERN }), Type.Null()], {
    description:
      'The id of the token that made it with POST /tokens; null for a token made with the CLI, at first start or by a JWT caller. Revoking, deleting or the expiry of that token ends this one too.',
  }),
}

/** A token as listed: never its secret. */
export const TokenShape = Type.Object(fields, {
  $id: 'Token',
  title: 'Token',
  additionalProperties: false,
  examples: [TOKEN_EXAMPLE],
})
export type TokenShape = Static<typeof TokenShape>

/** A token just made: with its secret, shown this once. */
export const CreatedToken = Type.Object(
  {
    ...fields,
    secret: Type.String({
      pattern: '^pst_[A-Za-z0-9_-]{43}$',
      description: 'The bearer secret; shown only in this answer',
    }),
  },
  {
    title: 'CreatedToken',
    additionalProperties: false,
    examples: [{ ...TOKEN_EXAMPLE, secret: 'pst_p35GU7Ptfdzo6RkvB--DwIzMSeco5h2RYf7TPCXP_GU' }],
  },
)

/** Path parameters of DELETE /tokens/{id}. */
export const TokenParams = Type.Object({ id }, { additionalProperties: false })
