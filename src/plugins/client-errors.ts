import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { ErrorCatalogue, type ErrorKind } from '../errors.js'

/** Largest request head (request line and headers) accepted, in bytes; Node's default, set on purpose. */
export const MAX_HEADER_BYTES = 16 * 1024

function kindOf(err: { code?: string }): { kind: ErrorKind; message: string } {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { kind: 'requestTimeout', message: 'the request did not arrive in time; the connection is closed' }
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return { kind: 'headersTooLarge', message: `request headers are over ${MAX_HEADER_BYTES / 1024} KiB` }
  }
  return { kind: 'malformedRequest', message: 'malformed HTTP request' }
}

/**
 * Answers errors Node raises before a request reaches Fastify (a head over the size limit, a client too
 * slow to send it, bytes that are not HTTP) in the Error shape, then closes the connection.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const { kind, message } = kindOf(err)
  const { status, error } = ErrorCatalogue[kind]
  const body = JSON.stringify({ error, message })
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy()
}
