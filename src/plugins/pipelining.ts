import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { sendApiError } from './error-handler.js'
import { tooManyRequests } from '../limits/too-many.js'
import { lingerOnClose } from '../socket/lingering-close.js'
import type { RequestGate } from './request-gates.js'

/** Most requests one connection may have in flight at once (HTTP/1.1 pipelining); past it, 429 and the close. */
export const MAX_IN_FLIGHT_PER_CONNECTION = 16

const IN_FLIGHT = Symbol('plantstore.inFlight')
const LAST_ANSWER = Symbol('plantstore.lastAnswer')
const ANSWER_BEFORE = Symbol('plantstore.answerBefore')
type CountedSocket = Socket & { [IN_FLIGHT]?: number; [LAST_ANSWER]?: ServerResponse }
type QueuedRequest = IncomingMessage & { [ANSWER_BEFORE]?: ServerResponse }

/**
 * Node parses every request of a chunk before any handler answers, and queues the answers of pipelined requests in
 * memory. A client that pipelines thousands of page requests and never reads made a server buffer hundreds of
 * megabytes of responses. Counting requests in flight per connection bounds that to a few pages: the one past
 * the limit gets 429 with `Connection: close`, and the connection ends after it, lingering so that the answers before
 * it still reach a client slow to read them.
 *
 * Even 16 pages per connection, over the hundreds of connections one address may open, were a lot to hold for
 * clients that read nothing. So a pipelined request's handler runs only once the answer before it on the connection
 * has been handed to the kernel (its response closed): answers are sent in order anyway, and a connection whose
 * client stops reading then holds one answer while the rest wait as unanswered requests, until the write stall
 * timeout closes it. A client that waits for each answer never waits here.
 *
 * Returns the request gate that counts a request in and refuses the one past the limit; it must come before any
 * other gate that may answer, since the onResponse hook here counts every answer back out.
 */
export function registerPipeliningLimit(app: FastifyInstance): RequestGate {
  const countIn: RequestGate = (request, reply) => {
    const socket = request.raw.socket as CountedSocket
    const inFlight = (socket[IN_FLIGHT] ?? 0) + 1
    socket[IN_FLIGHT] = inFlight
    if (inFlight <= MAX_IN_FLIGHT_PER_CONNECTION) {
      const before = socket[LAST_ANSWER]
      if (before !== undefined && !before.closed) (request.raw as QueuedRequest)[ANSWER_BEFORE] = before
      socket[LAST_ANSWER] = reply.raw
      return true
    }
    reply.header('connection', 'close')
    lingerOnClose(request.raw.socket)
    const message = `more than ${MAX_IN_FLIGHT_PER_CONNECTION} requests in flight on one connection; read the answers before sending more`
    sendApiError(reply, tooManyRequests('tooManyInFlight', message))
    return false
  }
  // preHandler: the last hook before the handler makes the answer; earlier refusals (401, 429) are small and go at once.
  app.addHook('preHandler', (request, reply, done) => {
    const before = (request.raw as QueuedRequest)[ANSWER_BEFORE]
    if (before === undefined || before.closed) return done()
    // 'close': the answer before was written out, or the connection is gone. Gone (the write stall timeout, a reset):
    // no one will read this answer, so it is not made. Without this check Node 20 and 22 made the next page for no
    // one, and Node 24 and later, which close every waiting answer with the connection, made all of them at once.
    before.once('close', () => {
      if (!request.raw.socket.destroyed) return done()
      reply.hijack()
      done()
    })
  })
  app.addHook('onResponse', (request, _reply, done) => {
    const socket = request.raw.socket as CountedSocket
    socket[IN_FLIGHT] = (socket[IN_FLIGHT] ?? 1) - 1
    done()
  })
  return countIn
}
