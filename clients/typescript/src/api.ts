import createFetchClient, { type Client } from 'openapi-fetch'
import { toError } from './errors.js'
import type { paths } from './generated/openapi.js'
import { parseJson, stringifyJson } from './json.js'
import { readOnly, retryingFetch, type RetryOptions } from './retry.js'

/** The request header that makes a create safe to send again. */
export const IDEMPOTENCY_KEY = 'idempotency-key'

/** The Idempotency-Key header of one create and its retries: the caller's key, or a new one. */
export const keyHeader = (key?: string) => ({ [IDEMPOTENCY_KEY]: key ?? globalThis.crypto.randomUUID() })

/** The typed openapi-fetch client every part of this one calls the API through. */
export type Api = Client<paths>

/** What createClient needs. */
export interface ClientOptions extends RetryOptions {
  /** Where the service answers, say `http://127.0.0.1:8080`. */
  baseUrl: string
  /** A bearer token (`pst_…`). */
  token: string
  /** The fetch to send requests with (the global one when not given). */
  fetch?: (request: Request) => Promise<Response>
}

/**
 * Requests whose repetition changes nothing, so that one whose answer was lost may be sent again: reads, a create
 * sent with an Idempotency-Key (a repeat gets the first answer; every create of this client has one), an identical
 * re-POST of a plant (it answers 200) and enabling a subscription. Not a DELETE (the second answers 404 if the first
 * went through).
 */
function repeatable(request: Request): boolean {
  if (readOnly(request) || request.headers.has(IDEMPOTENCY_KEY)) return true
  const path = new URL(request.url).pathname
  return request.method === 'POST' && (path.endsWith('/plants') || /\/webhooks\/[^/]+\/enable$/.test(path))
}

/** openapi-fetch with the token, lossless JSON bodies and retries. */
export function createApi(options: ClientOptions): Api {
  const fetch = options.fetch ?? ((request: Request) => globalThis.fetch(request))
  return createFetchClient<paths>({
    baseUrl: options.baseUrl,
    headers: { authorization: `Bearer ${options.token}` },
    fetch: retryingFetch(fetch, options, repeatable),
    bodySerializer: stringifyJson,
  })
}

/** What openapi-fetch answers with when asked for the body as text. */
interface TextResult {
  data?: string
  error?: unknown
  response: Response
}

/** The body of a successful answer, parsed losslessly; a PlantStoreError for any other. */
export function bodyOf<T>(result: TextResult): T {
  emptyOf(result)
  const { response, data } = result
  if (data === undefined || data === '') throw toError(response, 'a success without the body it should have')
  return parseJson(data) as T
}

/** Nothing for a successful answer without a body; a PlantStoreError for any other. */
export function emptyOf(result: { error?: unknown; response: Response }): void {
  if (!result.response.ok) throw toError(result.response, result.error)
}
