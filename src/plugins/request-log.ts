import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'

/**
 * Fastify's per-request log lines, reshaped: one info line when a request completes with request id (the
 * logger's binding), method, route pattern, status, duration and the caller's account and token id, never
 * the token; arrival only at debug level, for following a request that has not completed yet.
 */
export class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ method: request.method, url: request.url }, 'request received')
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const fields = {
      method: request.method,
      route: request.routeOptions.url ?? null,
      url: request.url,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      account: request.caller?.accountName ?? null,
      tokenId: request.caller?.tokenId ?? null,
    }
    if (error) request.log.error({ ...fields, err: error }, 'request completed')
    else request.log.info(fields, 'request completed')
  }
}
