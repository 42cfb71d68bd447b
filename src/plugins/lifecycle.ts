import type { FastifyInstance } from 'fastify'
import { sendError } from './error-handler.js'

/** Whether the instance still takes work; the server flips it when a shutdown signal arrives. */
export interface Lifecycle {
  draining: boolean
}

/**
 * Once draining, /readyz answers 503 so load balancers stop sending traffic here, while other requests
 * are still served (the balancer may not have noticed yet). Once closing, requests that still arrive on
 * open connections get 503 in the Error shape (Fastify's own 503 has another shape) and the connection closes.
 */
export function registerLifecycle(app: FastifyInstance, lifecycle: Lifecycle): void {
  let closing = false
  app.addHook('preClose', async () => {
    lifecycle.draining = true
    closing = true
  })
  app.addHook('onRequest', (request, reply, done) => {
    const refuse = closing || (lifecycle.draining && request.routeOptions.url === '/readyz')
    if (!refuse) return done()
    reply.header('connection', 'close')
    reply.header('retry-after', '1')
    sendError(reply, 'shuttingDown', 'this instance is shutting down; retry on another')
  })
}
