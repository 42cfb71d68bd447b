import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { ErrorCatalogue, type ErrorKind } from '../errors.js'
import { lingerOnClose } from './lingering-close.js'
import { rawErrorResponse } from './raw-response.js'
import { requestId } from './request-id.js'
import { logCompleted } from '../logging/request-log.js'

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

/**
 * Answers CONNECT, which Node hands to the server's 'connect' listeners instead of the request handler (with none, it
 * closed the connection without a word): the 404 of any method without a route, then the close, since what follows a
 * CONNECT on its connection is a tunnel's bytes, not HTTP. The close lingers, as after any answer that ends a
 * connection, so that bytes the client already sent do not reset it before it reads the answer.
 *
 * Fastify never sees the request, so what it gives every other one is given here: an X-Request-Id (the client's
 * when sane, as for any request), and a request line on `log` with the same fields (URL redacted, client address),
 * so that a refused CONNECT can be traced to where it came from. The address is the connection's: TRUST_PROXY's
 * resolution needs Fastify's request, and a proxy does not forward CONNECT as a request anyway.
 */
export function connectHandler(log: FastifyBaseLogger): (request: IncomingMessage, socket: Duplex) => void {
  return (request, socket) => {
    if (socket.destroyed) return
    const started = performance.now()
    const tcp = socket as Socket
    tcp.on('error', () => {})
    lingerOnClose(tcp)
    const reqId = requestId(request)
    const { status } = ErrorCatalogue.routeNotFound
    tcp.write(rawErrorResponse('routeNotFound', `no route for CONNECT ${request.url ?? ''}`, { 'X-Request-Id': reqId }))
    tcp.destroySoon()
    logCompleted(log.child({ reqId }), {
      method: 'CONNECT',
      route: null,
      url: request.url ?? '',
      status,
      elapsedMs: performance.now() - started,
      client: tcp.remoteAddress ?? null,
      account: null,
      tokenId: null,
    })
  }
}
