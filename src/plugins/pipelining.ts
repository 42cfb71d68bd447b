import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { sendError } from './error-handler.js'

/** Most requests one connection may have in flight at once (HTTP/1.1 pipelining); past it, 429 and the close. */
export const MAX_IN_FLIGHT_PER_CONNECTION = 16

const IN_FLIGHT = Symbol('plantstore.inFlight')
type CountedSocket = Socket & { [IN_FLIGHT]?: number }

/**
 * Node parses every request of a chunk before any handler answers, and queues the answers of pipelined requests in
 * memory. A client that pipelines thousands of page requests and never reads made a server buffer hundreds of
 * megabytes of responses. Counting requests in flight per connection bounds that to a few pages: the one past
 * the limit gets 429 with `Connection: close`, and the connection ends after it.
 */
export function registerPipeliningLimit(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket as CountedSocket
    const inFlight = (socket[IN_FLIGHT] ?? 0) + 1
    socket[IN_FLIGHT] = inFlight
    if (inFlight <= MAX_IN_FLIGHT_PER_CONNECTION) return done()
    reply.header('connection', 'close')
    sendError(
      reply,
      'tooManyInFlight',
      `more than ${MAX_IN_FLIGHT_PER_CONNECTION} requests in flight on one connection; read the answers before sending more`,
    )
  })
  app.addHook('onResponse', (request, _reply, done) => {
    const socket = request.raw.socket as CountedSocket
    socket[IN_FLIGHT] = (socket[IN_FLIGHT] ?? 1) - 1
    done()
  })
}
