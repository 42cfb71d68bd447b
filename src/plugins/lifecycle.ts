import type { FastifyInstance } from 'fastify'
import { ApiError } from '../errors.js'
import { retryAfter } from '../limits/too-many.js'
import { sendApiError } from './error-handler.js'
import type { RequestGate } from './request-gates.js'

/** Whether the instance still takes work; the server flips it when a shutdown signal arrives. */
export interface Lifecycle {
  draining: boolean
}

/**
 * Once draining, /readyz answers 503 so load balancers stop sending traffic here, while other requests
 * are still served (the balancer may not have noticed yet). Once closing, requests that still arrive on
 * open connections get 503 in the Error shape (Fastify's own 503 has another shape) and the connection closes.
 * Returns the request gate that answers so.
 */
export function registerLifecycle(app: FastifyInstance, lifecycle: Lifecycle): RequestGate {
  let closing = false
  app.addHook('preClose', async () => {
    lifecycle.draining = true
    closing = true
  })
  return (request, reply) => {
    const refuse = closing || (lifecycle.draining && request.routeOptions.url === '/readyz')
    if (!refuse) return true
    reply.header('connection', 'close')
    sendApiError(
      reply,
      new ApiError('shuttingDown', 'this instance is shutting down; retry on another', retryAfter(1000)),
    )
    return false
  }
}
