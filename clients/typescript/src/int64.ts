const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

/** An id the API can hold: a bigint in the signed 64-bit range, or a number that is a safe integer. */
export type IdInput = bigint | number

/**
 * `value` as a bigint, refused (RangeError) when it cannot be an exact int64: a number that is not a safe integer
 * (say 9007199254740993, which JavaScript already holds as ...992) or a bigint out of range.
 */
export function toId(value: IdInput): bigint {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) {
      throw new RangeError(`id ${value} is not a safe integer; pass ids beyond ±2^53 as bigint`)
    }
    return BigInt(value)
  }
  if (typeof value !== 'bigint') throw new TypeError(`id must be a bigint or a number, got ${typeof value}`)
  if (value < INT64_MIN || value > INT64_MAX) throw new RangeError(`id ${value} is outside the signed 64-bit range`)
  return value
}
