import fastifyCors from '@fastify/cors'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { CORS_MAX_AGE_SECONDS } from '../config.js'
import { IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER } from '../schemas/idempotency-key.js'

/** Which browser origins may call the API; none (the default) means no CORS headers at all. */
export interface CorsOptions {
  /** Exact origins, as browsers send them: `https://app.example.com`, `http://localhost:5173`. */
  origins: readonly string[]
}

const METHODS = ['GET', 'HEAD', 'POST', 'DELETE']
// Bearer tokens travel in Authorization, never in cookies: no credentials mode, so no Allow-Credentials.
const ALLOWED_HEADERS = ['authorization', 'content-type', IDEMPOTENCY_KEY_HEADER]
// What a page's script may read of an answer, beyond the headers every answer exposes: paging, pacing, the
// authentication challenge, whether an answer is a replay, and the request id to quote in a report.
const EXPOSED_HEADERS = [
  'link',
  'retry-after',
  'ratelimit',
  'ratelimit-policy',
  'www-authenticate',
  REPLAYED_HEADER,
  'x-request-id',
]
const EXPOSED = EXPOSED_HEADERS.join(', ')

const varies = (reply: FastifyReply) => /(^|,)\s*origin\s*(,|$)/i.test(String(reply.getHeader('vary') ?? ''))

/**
 * CORS for the listed origins (@fastify/cors, in an onRequest hook): a preflight from one of them is answered 204
 * there, before authentication and the rate limits, which it never reaches; every other answer to one of them
 * carries `Access-Control-Allow-Origin` with that origin. A request from any other origin, or without one, gets no
 * grant, and an OPTIONS request that is not an allowed preflight is 404 as before. Every answer says `Vary: Origin`.
 */
export async function registerCors(app: FastifyInstance, { origins }: CorsOptions): Promise<void> {
  const allowed = new Set(origins)
  // The answers made before the plugin's hook runs (the request gates': a 503 while draining, a 429 for too many
  // pipelined requests, a 400 for a bad head) get the grant here, so that a page can read them too. Those Fastify
  // makes before routing (a URL with broken percent-encoding) pass no hook and carry none.
  app.addHook('onSend', (request, reply, payload, done) => {
    const { origin } = request.headers
    if (origin !== undefined && allowed.has(origin) && !reply.hasHeader('access-control-allow-origin')) {
      reply.header('access-control-allow-origin', origin)
      reply.header('access-control-expose-headers', EXPOSED)
    }
    if (!varies(reply)) {
      const vary = reply.getHeader('vary')
      reply.header('vary', vary === undefined ? 'Origin' : `${String(vary)}, Origin`)
    }
    done(null, payload)
  })
  await app.register(fastifyCors, {
    origin: (origin, grant) => grant(null, origin !== undefined && allowed.has(origin)),
    methods: METHODS,
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: CORS_MAX_AGE_SECONDS,
    // An OPTIONS from an allowed origin without Access-Control-Request-Method is answered as a preflight too,
    // rather than with the plugin's text/plain 400, which would break the Error shape.
    strictPreflight: false,
    hideOptionsRoute: true,
  })
}
