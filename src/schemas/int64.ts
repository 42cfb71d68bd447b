import { Kind, TypeRegistry, Type, type TUnsafe } from '@sinclair/typebox'

export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n

// One spelling per value: no leading zeros, no "-0".
const CANONICAL_INTEGER = /^(0|-?[1-9][0-9]*)$/

/** True when `value` is a bigint inside the signed 64-bit range. */
export function isInt64(value: unknown): value is bigint {
  return typeof value === 'bigint' && value >= INT64_MIN && value <= INT64_MAX
}

/** Parses a canonical decimal integer string into a bigint, or returns undefined. */
export function parseInt64(text: string): bigint | undefined {
  if (text.length > 20 || !CANONICAL_INTEGER.test(text)) return undefined
  const value = BigInt(text)
  return isInt64(value) ? value : undefined
}

// Int64 values travel as bigint end to end (the JSON body parser yields
// bigint for integer literals), so validation needs a kind of its own: JSON
// Schema's "integer" would be checked against a lossy JS number.
TypeRegistry.Set('Int64', (_schema, value) => isInt64(value))

/** A signed 64-bit integer, exact as bigint; documented as `integer`/`int64`. */
export function Int64(options: { description?: string } = {}): TUnsafe<bigint> {
  return Type.Unsafe<bigint>({ ...options, [Kind]: 'Int64', type: 'integer', format: 'int64' })
}
