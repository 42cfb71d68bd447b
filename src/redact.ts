// Query parameters that carry a secret in PostgreSQL connection URLs.
const SECRET_PARAMS = ['password', 'sslpassword']

/**
 * A URL fit for error messages and logs: its password (also in `?password=`) replaced by `***`; the
 * user name stays, it helps diagnose. A URL that does not parse loses everything between `//` and its last `@`.
 */
export function redactUrl(url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return url.replace(/\/\/.*@/, '//***@')
  }
  const secrets = SECRET_PARAMS.filter((name) => parsed.searchParams.has(name))
  if (parsed.password === '' && secrets.length === 0) return url
  if (parsed.password !== '') parsed.password = '***'
  for (const name of secrets) parsed.searchParams.set(name, '***')
  return parsed.toString()
}

const CENSOR = '[Redacted]'

/** `value` with its `headers.authorization` censored (a copy), or `value` itself when it carries none. */
function censored(value: object): object {
  const headers = (value as { headers?: unknown }).headers
  if (headers === null || typeof headers !== 'object' || !('authorization' in headers)) return value
  return { ...value, headers: { ...headers, authorization: CENSOR } }
}

/**
 * A log line's object with the Authorization header censored wherever a line can carry headers: its own `headers`,
 * or the `headers` of any value one level down (req, request, res, err...). Copies only what it censors. pino's
 * `redact` did the same, but parsed its paths again and cloned on every line: a third of a request line's cost.
 */
export function redactAuthorization(object: Record<string, unknown>): Record<string, unknown> {
  let result = censored(object) as Record<string, unknown>
  for (const key in object) {
    const value = object[key]
    if (value === null || typeof value !== 'object') continue
    const copy = censored(value)
    if (copy === value) continue
    if (result === object) result = { ...object }
    result[key] = copy
  }
  return result
}
