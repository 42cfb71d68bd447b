import type { FastifyInstance } from 'fastify'
import { isInteger, parse } from 'lossless-json'
import { ApiError } from '../errors.js'

// Integer literals become bigint so int64 ids survive exactly (JSON.parse
// would round 9007199254740993). Other numbers stay JS numbers.
function parseNumber(text: string): bigint | number {
  return isInteger(text) ? BigInt(text) : Number(text)
}

/** The largest request body accepted, in bytes; larger ones get 413. */
export const BODY_LIMIT = 64 * 1024

const CHARSET = /;\s*charset="?([^";\s]+)/i
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Parses a JSON body losslessly; malformed input (bad UTF-8 too) is a 400 with its own catalogue entry. */
export function parseJsonBody(raw: Buffer): unknown {
  let text: string
  try {
    text = utf8.decode(raw)
  } catch {
    throw new ApiError('malformedJson', 'body: not valid UTF-8')
  }
  if (text.trim() === '') throw new ApiError('malformedJson', 'body: expected a JSON object, got an empty body')
  try {
    return parse(text, null, parseNumber)
  } catch (err) {
    const reason = err instanceof Error ? err.message : 'unparseable'
    throw new ApiError('malformedJson', `body: malformed JSON (${reason})`)
  }
}

/** Makes the lossless JSON parser the only body parser: any other Content-Type is a 415. */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // A Content-Type header on a bodiless DELETE or GET is harmless; only routes that take a body demand one.
    if ((body as Buffer).length === 0 && request.routeOptions.schema?.body === undefined) return done(null, undefined)
    // Bodies are read as they arrive: a compressed one would be taken for malformed JSON, or worse, for JSON.
    const coding = request.headers['content-encoding']?.trim().toLowerCase()
    if (coding !== undefined && coding !== '' && coding !== 'identity') {
      const error = new ApiError(
        'unsupportedEncoding',
        'Content-Encoding must be identity (bodies are not decompressed)',
        {
          'accept-encoding': 'identity',
        },
      )
      return done(error, undefined)
    }
    const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase()
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(new ApiError('unsupportedMediaType', 'Content-Type charset must be utf-8'), undefined)
    }
    try {
      done(null, parseJsonBody(body as Buffer))
    } catch (err) {
      done(err as Error, undefined)
    }
  })
}
