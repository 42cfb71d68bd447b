import { Type, type StringOptions, type TString } from '@sinclair/typebox'

/**
 * No NUL character and no unpaired UTF-16 surrogate: PostgreSQL cannot store NUL, and an unpaired
 * surrogate has no UTF-8 form, so either would come back changed (or not be stored at all).
 */
export const TEXT_PATTERN = '^(?:[^\\u0000\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])*$'

export const TEXT_RULE = 'text without NUL characters or unpaired surrogates'

/** A string every storage backend keeps exactly as sent. */
export function Text(options: StringOptions): TString {
  return Type.String({ ...options, pattern: TEXT_PATTERN })
}
