import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

/** A check every request meets on arrival: true to go on; false when it has answered, and the request ends there. */
export type RequestGate = (request: FastifyRequest, reply: FastifyReply) => boolean

/**
 * Runs `gates` in order in one onRequest hook, up to the first that answers. One hook rather than one per concern:
 * each hook costs every request a turn of Fastify's hook runner, and these are a few lines each.
 */
export function registerRequestGates(app: FastifyInstance, gates: RequestGate[]): void {
  app.addHook('onRequest', (request, reply, done) => {
    for (const gate of gates) if (!gate(request, reply)) return
    done()
  })
}

/** Gives every response X-Request-Id, errors and 404s included. */
export const sendRequestId: RequestGate = (request, reply) => {
  reply.header('x-request-id', request.id)
  return true
}
