import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify'
import { redactRequestUrl } from './log-redaction.js'

/**
 * Fastify's per-request log lines, reshaped: one info line when a request completes with request id (the
 * logger's binding), method, route pattern, URL (credentials in it redacted), status, duration, the client's address
 * (as TRUST_PROXY resolves it) and the caller's account and token id, never the token; arrival only at debug level,
 * for following a request that has not completed yet.
 */
export class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug(
      { method: request.method, url: redactRequestUrl(request.url), client: request.ip },
      'request received',
    )
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    logCompleted(request.log, {
      method: request.method,
      route: request.routeOptions.url ?? null,
      url: request.url,
      status: reply.statusCode,
      elapsedMs: reply.elapsedTime,
      client: request.ip,
      account: request.caller?.accountName ?? null,
      tokenId: request.caller?.tokenId ?? null,
      error,
    })
  }
}

/** What a request line says, as its writer knows it: the URL as sent, the time taken unrounded. */
export interface CompletedRequest {
  method: string
  route: string | null
  url: string
  status: number
  elapsedMs: number
  client: string | null
  account: string | null
  tokenId: string | null
  error?: Error | null | undefined
}

/** The fields of a `request completed` line besides its message (and the request id its logger binds). */
export const COMPLETED_FIELDS = [
  'method',
  'route',
  'url',
  'status',
  'durationMs',
  'client',
  'account',
  'tokenId',
] as const

/**
 * Writes the `request completed` line, the same fields whoever answered: Fastify's requests, and the CONNECTs Node
 * hands the server directly (socket/client-errors.ts). The URL has its credentials redacted here.
 */
export function logCompleted(log: FastifyBaseLogger, line: CompletedRequest): void {
  const fields = {
    method: line.method,
    route: line.route,
    url: redactRequestUrl(line.url),
    status: line.status,
    durationMs: Math.round(line.elapsedMs * 100) / 100,
    client: line.client,
    account: line.account,
    tokenId: line.tokenId,
  } satisfies Record<(typeof COMPLETED_FIELDS)[number], unknown>
  if (line.error) log.error({ ...fields, err: line.error }, 'request completed')
  else log.info(fields, 'request completed')
}
