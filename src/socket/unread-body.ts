import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { lingerOnClose } from './lingering-close.js'

const expectsBody = (headers: IncomingHttpHeaders): boolean =>
  headers['transfer-encoding'] !== undefined ||
  (headers['content-length'] !== undefined && headers['content-length'] !== '0')

/**
 * An answer sent before the request's body has all arrived (a 401 or 429 from onRequest, a 404, a 415) ends the
 * connection, as the 413 does: kept open, it waited for the rest of a body that might never come, and the request
 * timeout then answered the same request a second time (408). The close lingers, so that a client still sending its
 * body gets the answer rather than a reset.
 *
 * Whether the body has arrived is decided a turn later: an answer made while Node's parser is still in the chunk
 * that carried the head (a refusal of a request sent in one packet, say) sees `complete` false only because the
 * parser has not yet reached the body bytes that follow in that same chunk. Deciding at once closed those
 * connections for nothing, and every 401 or 429 to a whole request cost the client a reconnect. After setImmediate
 * the chunk has been parsed: a body still incomplete then has not arrived.
 */
export function registerUnreadBodyClose(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.complete || !expectsBody(request.headers)) return done(null, payload)
    setImmediate(() => {
      if (!request.raw.complete) {
        reply.header('connection', 'close')
        lingerOnClose(request.raw.socket)
      }
      done(null, payload)
    })
  })
}
