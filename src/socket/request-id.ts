import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

// Echo only ids that are safe in logs and headers; anything else gets a fresh one.
const SANE_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Fastify `genReqId`: the incoming X-Request-Id when sane, else a new UUID. */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && SANE_ID.test(incoming) ? incoming : randomUUID()
}
