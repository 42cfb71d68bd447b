import { STATUS_CODES } from 'node:http'
import { ERROR_CONTENT_TYPE, errorAnswer, type ErrorKind } from '../errors.js'

/** `retry-after` as `Retry-After`, the case of the other headers of a raw answer. */
const titleCase = (name: string) =>
  name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase())

/**
 * A whole HTTP/1.1 answer in the Error shape, with `Connection: close`, to write straight to a socket: for refusals
 * made where Fastify has no request to answer (bytes that did not parse, a connection refused before it is read).
 */
export function rawErrorResponse(kind: ErrorKind, message: string, headers: Record<string, string> = {}): string {
  const { status, body } = errorAnswer(kind, message)
  const text = JSON.stringify(body)
  const extra = Object.entries(headers)
    .map(([name, value]) => `${titleCase(name)}: ${value}\r\n`)
    .join('')
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${ERROR_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(text)}\r\n${extra}Connection: close\r\n\r\n${text}`
  )
}
