/** Set on a parsed query string whose parameter had broken percent-encoding: that parameter's name, as sent. */
export const MALFORMED_PARAMETER = Symbol('plantstore.malformedParameter')

/** A parsed query string: each parameter's value, an array when repeated; own keys only, `__proto__` included. */
export type ParsedQuery = Record<string, string | string[]> & { [MALFORMED_PARAMETER]?: string }

/**
 * A new object whose prototype chain does not reach Object.prototype, so `__proto__` (or `constructor`) is a key like
 * any other. Made by a constructor over a prototype-less prototype rather than by `Object.create(null)`, whose
 * objects V8 keeps as hash tables: slower to fill and to read on every request.
 */
export const bareObject: <T extends object>() => T = (() => {
  function Bare() {}
  Bare.prototype = Object.create(null) as object
  return <T extends object>() => new (Bare as unknown as new () => T)()
})()

function decoded(part: string): string | undefined {
  if (part.indexOf('%') === -1 && part.indexOf('+') === -1) return part
  try {
    return decodeURIComponent(part.replaceAll('+', ' '))
  } catch {
    return undefined
  }
}

/**
 * Fastify's query string parser, replaced: the default one took a value with broken percent-encoding (`tag=%FF`)
 * literally, so the API answered for a tag nobody sent. Here such a parameter is left out and named under
 * MALFORMED_PARAMETER, for the validator to refuse. The object's prototype chain does not reach Object.prototype, so
 * `__proto__` is a parameter like any other (and unknown, so refused).
 */
export function parseQueryString(query: string): ParsedQuery {
  const parsed = bareObject<ParsedQuery>()
  if (query.length === 0) return parsed
  for (const pair of query.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const rawName = eq === -1 ? pair : pair.slice(0, eq)
    const name = decoded(rawName)
    const value = eq === -1 ? '' : decoded(pair.slice(eq + 1))
    if (name === undefined || value === undefined) {
      parsed[MALFORMED_PARAMETER] ??= name ?? rawName
      continue
    }
    const before = parsed[name]
    parsed[name] = before === undefined ? value : Array.isArray(before) ? [...before, value] : [before, value]
  }
  return parsed
}
