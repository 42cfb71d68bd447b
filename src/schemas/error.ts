import { Type, type Static } from '@sinclair/typebox'
import { ErrorCatalogue } from '../errors.js'

const entries = Object.entries(ErrorCatalogue)

// The catalogue as the reference page shows it, with the Error schema: after the operations, not before them.
const catalogue = [
  'Every error response is `application/json` `{error, message}`; `error` is a stable value from this catalogue:',
  '',
  '| error | status | cause |',
  '|---|---|---|',
  ...entries.map(([, { error, status, summary }]) => `| ${error} | ${status} | ${summary} |`),
  '',
  'Answers given before the token is read carry neither `RateLimit-Policy` nor `RateLimit`: a 401, the ' +
    "failed-authentication limit's 429 (42901), 40003, 40004, 42902, 42903, 50302 and 50303, and 50001 or 50301 " +
    'when the token could not be looked up.',
].join('\n')

/** The Error shape of every error response: `{error, message}`. */
export const ErrorBody = Type.Object(
  {
    error: Type.Integer({
      format: 'int32',
      description: 'Stable numeric error value from the error catalogue',
      enum: entries.map(([, entry]) => entry.error),
      // Names for the values, which client generators (openapi-generator, openapi-typescript) turn into constants.
      'x-enum-varnames': entries.map(([kind]) => kind),
      'x-enum-descriptions': entries.map(([, entry]) => entry.summary),
    }),
    message: Type.String({ description: 'What was wrong, and where' }),
  },
  { $id: 'Error', title: 'Error', description: catalogue },
)

export type ErrorBody = Static<typeof ErrorBody>
