import fastifyCors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import { CORS_MAX_AGE_SECONDS } from '../config.js'

/** Which browser origins may call the API; none (the default) means no CORS headers at all. */
export interface CorsOptions {
  /** Exact origins, as browsers send them: `https://app.example.com`, `http://localhost:5173`. */
  origins: readonly string[]
}

const METHODS = ['GET', 'HEAD', 'POST', 'DELETE']
// Bearer tokens travel in Authorization, never in cookies: no credentials mode, so no Allow-Credentials.
const ALLOWED_HEADERS = ['authorization', 'content-type']
// What a page's script may read of an answer, beyond the headers every answer exposes: paging, pacing, the
// authentication challenge and the request id to quote in a report.
const EXPOSED_HEADERS = [
  'link',
  'retry-after',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'www-authenticate',
  'x-request-id',
]

/**
 * CORS for the listed origins (@fastify/cors, in an onRequest hook): a preflight from one of them is answered 204
 * there, before authentication and the rate limits, which it never reaches; every other answer to one of them
 * carries `Access-Control-Allow-Origin` with that origin. A request from any other origin, or without one, gets no
 * grant, and an OPTIONS request that is not an allowed preflight is 404 as before. Every answer says `Vary: Origin`.
 */
export async function registerCors(app: FastifyInstance, { origins }: CorsOptions): Promise<void> {
  const allowed = new Set(origins)
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
