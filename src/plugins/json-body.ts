import type { FastifyInstance, FastifyRequest } from 'fastify'
import { isInteger, parse } from 'lossless-json'
import { ApiError } from '../errors.js'

// Integer literals become bigint so int64 ids survive exactly (JSON.parse
// would round 9007199254740993). Other numbers stay JS numbers, and so does -0: as in a path, an int64 has one
// spelling per value, so `"id": -0` is refused like `1.0` rather than taken for 0.
function parseNumber(text: string): bigint | number {
  return isInteger(text) && text !== '-0' ? BigInt(text) : Number(text)
}

/** The deepest a body's arrays and objects may nest; the API's bodies need 2 levels. */
export const MAX_JSON_DEPTH = 32

/**
 * Whether `text` nests arrays and objects deeper than MAX_JSON_DEPTH (brackets in strings not counted). The parser
 * recurses, so a deep enough body ran it out of stack, and the 400 said "Maximum call stack size exceeded".
 */
function nestsTooDeep(text: string): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i)
    if (inString) {
      if (char === 0x5c) i++
      else if (char === 0x22) inString = false
    } else if (char === 0x22) inString = true
    else if (char === 0x5b || char === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) return true
    } else if (char === 0x5d || char === 0x7d) depth--
  }
  return false
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
  // Fewer characters than levels cannot nest that deep: most bodies skip the scan.
  if (text.length > MAX_JSON_DEPTH && nestsTooDeep(text)) {
    throw new ApiError('malformedJson', `body: arrays and objects nested deeper than ${MAX_JSON_DEPTH} levels`)
  }
  try {
    return parse(text, null, parseNumber)
  } catch (err) {
    const reason = err instanceof Error ? err.message : 'unparseable'
    throw new ApiError('malformedJson', `body: malformed JSON (${reason})`)
  }
}

/** Whether the request's route declares no body (DELETE, an enable): its Content-Type decides nothing. */
const takesNoBody = (request: FastifyRequest): boolean => request.routeOptions.schema?.body === undefined

/**
 * Makes the lossless JSON parser the only body parser: any other Content-Type is a 415 on a route that takes a body.
 * A route that takes none (DELETE) ignores the header and what came with it, as it ignores a body of JSON.
 */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers()
  // Decided on the headers alone, as before a parser existed for other types: a 415 comes before any 413.
  app.addContentTypeParser('*', (request, _payload, done) => {
    if (takesNoBody(request)) return done(null, undefined)
    done(new ApiError('unsupportedMediaType', 'Content-Type must be application/json'), undefined)
  })
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // A Content-Type header on a bodiless DELETE or GET is harmless; only routes that take a body demand one.
    if ((body as Buffer).length === 0 && takesNoBody(request)) return done(null, undefined)
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
