import { STATUS_CODES } from 'node:http'
import { ErrorCatalogue, type ErrorKind } from '../errors.js'

/**
 * A whole HTTP/1.1 answer in the Error shape, with `Connection: close`, to write straight to a socket: for refusals
 * made where Fastify has no request to answer (bytes that did not parse, a connection refused before it is read).
 */
export function rawErrorResponse(kind: ErrorKind, message: string, headers: Record<string, string> = {}): string {
  const { status, error } = ErrorCatalogue[kind]
  const body = JSON.stringify({ error, message })
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`
  )
}
