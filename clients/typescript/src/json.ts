import { LosslessNumber, parse, stringify } from 'lossless-json'
import { INT64_FIELDS } from './generated/int64-fields.js'

/**
 * Parses an answer of the API: the int64 fields become bigint, exact over the whole range (JSON.parse would round
 * 9007199254740993 to ...992), and every other number a number.
 */
export function parseJson(text: string): unknown {
  return parse(text, (key, value) => {
    if (!(value instanceof LosslessNumber)) return value
    return INT64_FIELDS.has(key) ? BigInt(value.value) : Number(value.value)
  })
}

/** JSON text of a request body; bigint values are written as integer literals. */
export function stringifyJson(value: unknown): string {
  const text = stringify(value)
  if (text === undefined) throw new TypeError('request body cannot be written as JSON')
  return text
}
