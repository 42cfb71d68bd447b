import { parseInt64 } from '../schemas/int64.js'

// Cursors are opaque to clients; the version prefix lets the format change later without misreading old ones.
const PREFIX = 'p1:'

/** The cursor that continues a listing after the plant with id `lastId`. */
export function encodeCursor(lastId: bigint): string {
  return Buffer.from(PREFIX + lastId.toString(), 'utf8').toString('base64url')
}

/** The id a cursor continues after, or undefined for a cursor this server did not make. */
export function decodeCursor(cursor: string): bigint | undefined {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  if (!text.startsWith(PREFIX)) return undefined
  return parseInt64(text.slice(PREFIX.length))
}
