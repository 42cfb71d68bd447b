import { Type, type Static } from '@sinclair/typebox'

/** The Error shape of every error response: `{error, message}`. */
export const ErrorBody = Type.Object(
  {
    error: Type.Integer({
      format: 'int32',
      description: 'Stable numeric error value from the error catalogue',
    }),
    message: Type.String({ description: 'What was wrong, and where' }),
  },
  { $id: 'Error', title: 'Error' },
)

export type ErrorBody = Static<typeof ErrorBody>
