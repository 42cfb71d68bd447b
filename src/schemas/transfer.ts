import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { SCOPES, TOKEN_ID_PREFIX } from '../auth/tokens.js'
import { EVENT_TYPES } from '../webhooks/events.js'
import { NAME_MAX, TAG_MAX } from './plant.js'
import { Text } from './text.js'

/*
 * The lines of an export (`plantstore export`, read back by `plantstore import`): NDJSON, a header then one record
 * per line. docs/export-format.md describes them; change both together, and the version with any change a reader
 * of the previous version would misread.
 */

/** What the header's "format" names. */
export const EXPORT_FORMAT = 'plantstore-export'
/** The version this release writes and the only one it reads. */
export const EXPORT_VERSION = 1

// Exactly what Date.prototype.toISOString writes: milliseconds, UTC; from 1970 (no time stored is older), within
// what both backends keep.
const time = Type.String({ pattern: '^(19[7-9]\\d|[2-9]\\d{3})-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$' })
const timeOrNull = Type.Union([time, Type.Null()])
const account = Text({ minLength: 1 })
const tokenId = Type.String({ pattern: `^${TOKEN_ID_PREFIX}[0-9a-f]{16}$` })

/** The first line: which format and version follow, when, and of which account (null: the whole store). */
export const ExportHeader = Type.Object(
  {
    format: Type.String(),
    version: Type.Integer(),
    exportedAt: time,
    account: Type.Union([account, Type.Null()]),
  },
  { additionalProperties: false },
)
export type ExportHeader = Static<typeof ExportHeader>

export const AccountLine = Type.Object(
  { type: Type.Literal('account'), name: account, createdAt: time },
  { additionalProperties: false },
)

/** A token: the SHA-256 of its secret in base64url, never the secret. */
export const TokenLine = Type.Object(
  {
    type: Type.Literal('token'),
    id: tokenId,
    account,
    secretHash: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$' }),
    scopes: Type.Array(Type.Union(SCOPES.map((scope) => Type.Literal(scope))), { minItems: 1, uniqueItems: true }),
    label: Type.Union([Text({}), Type.Null()]),
    createdAt: time,
    expiresAt: timeOrNull,
    revokedAt: timeOrNull,
    createdBy: Type.Union([tokenId, Type.Null()]),
  },
  { additionalProperties: false },
)

/** A plant: its id a decimal string (exact over the whole int64 range, whatever reads the JSON). */
export const PlantLine = Type.Object(
  {
    type: Type.Literal('plant'),
    account,
    id: Type.String({ pattern: '^(0|-?[1-9][0-9]{0,18})$' }),
    name: Text({ minLength: 1, maxLength: NAME_MAX }),
    tag: Type.Union([Text({ minLength: 1, maxLength: TAG_MAX }), Type.Null()]),
  },
  { additionalProperties: false },
)

/** A webhook subscription, with its signing secret. */
export const SubscriptionLine = Type.Object(
  {
    type: Type.Literal('subscription'),
    id: Type.String({ pattern: '^whk_[0-9a-f]{16}$' }),
    account,
    url: Text({ minLength: 1 }),
    secret: Text({ minLength: 1 }),
    eventTypes: Type.Array(Type.Union(EVENT_TYPES.map((type) => Type.Literal(type))), {
      minItems: 1,
      uniqueItems: true,
    }),
    createdAt: time,
    state: Type.Union([Type.Literal('active'), Type.Literal('disabled')]),
    disabledReason: Type.Union([Type.Literal('failing'), Type.Literal('backlog'), Type.Null()]),
    disabledAt: timeOrNull,
  },
  { additionalProperties: false },
)

const count = Type.Integer({ minimum: 0 })

/** The last line: how many records of each type the export wrote, so that a cut-off export is refused. */
export const EndLine = Type.Object(
  {
    type: Type.Literal('end'),
    counts: Type.Object(
      { accounts: count, tokens: count, plants: count, subscriptions: count },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)
export type EndLine = Static<typeof EndLine>

/** The schema of each record type, in the order an export writes them. */
export const RECORD_LINES = {
  account: AccountLine,
  token: TokenLine,
  plant: PlantLine,
  subscription: SubscriptionLine,
} as const satisfies Record<string, TSchema>
export type RecordType = keyof typeof RECORD_LINES
export type AccountLine = Static<typeof AccountLine>
export type TokenLine = Static<typeof TokenLine>
export type PlantLine = Static<typeof PlantLine>
export type SubscriptionLine = Static<typeof SubscriptionLine>
