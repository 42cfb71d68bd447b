import { isInteger, parse } from 'lossless-json'

/** Parses JSON keeping integers exact as bigint, the way a careful client must read int64 ids. */
export function parseExact(text: string): unknown {
  return parse(text, null, (value) => (isInteger(value) ? BigInt(value) : Number(value)))
}
