import { Type, type Static } from '@sinclair/typebox'
import { TAG_MAX } from './plant.js'
import { Text } from './text.js'

export const LIMIT_DEFAULT = 100
export const LIMIT_MAX = 1000
export const CURSOR_MAX = 64

/** Query string of GET /plants. Unknown parameters are rejected, so typos surface. */
export const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: 1,
        maximum: LIMIT_MAX,
        default: LIMIT_DEFAULT,
        description: 'The maximum number of results to return',
      }),
    ),
    cursor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: CURSOR_MAX,
        pattern: '^[A-Za-z0-9_-]+$',
        description: 'Opaque position from the `rel="next"` Link header of the previous page; do not build it yourself',
      }),
    ),
    tag: Type.Optional(
      Text({
        minLength: 1,
        maxLength: TAG_MAX,
        description: 'Only plants whose tag equals this value',
      }),
    ),
    fields: Type.Optional(
      Type.String({
        pattern: '^(id|name|tag)(,(id|name|tag))*$',
        description:
          'Comma-separated fields to return per item, from id, name, tag; must include name. Default: name,tag',
      }),
    ),
  },
  { additionalProperties: false },
)
export type ListQuery = Static<typeof ListQuery>
