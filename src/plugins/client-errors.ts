import type { Socket } from 'node:net'
import type { ErrorKind } from '../errors.js'
import { rawErrorResponse } from './raw-response.js'

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
  if (socket.writable) socket.write(rawErrorResponse(kind, message))
  socket.destroy()
}
