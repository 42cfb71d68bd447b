import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'

// Echo only ids that are safe in logs and headers; anything else gets a fresh one.
const SANE_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Fastify `genReqId`: the incoming X-Request-Id when sane, else a new UUID. */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && SANE_ID.test(incoming) ? incoming : randomUUID()
}

/** Sends X-Request-Id on every response, errors and 404s included. */
export function registerRequestId(app: FastifyInstance): void {
  // Callback-style hooks here and in other per-request plugins: an async hook costs a promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })
}
