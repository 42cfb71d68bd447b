// Query parameters that carry a secret in PostgreSQL connection URLs.
const SECRET_PARAMS = ['password', 'sslpassword']
// Their values in a query string, for a URL that does not parse.
const SECRET_PARAM_VALUE = new RegExp(`([?&](?:${SECRET_PARAMS.join('|')})=)[^&#]*`, 'g')

/**
 * A URL fit for error messages and logs: its password (also in `?password=`) replaced by `***`; the
 * user name stays, it helps diagnose. A URL that does not parse loses everything between `//` and its last `@`, and
 * the values of those query parameters.
 */
export function redactUrl(url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    // Such as a PostgreSQL URL naming several hosts (`postgres://h1:5432,h2:5432/db`), which URL cannot parse.
    return url.replace(/\/\/.*@/, '//***@').replace(SECRET_PARAM_VALUE, '$1***')
  }
  const secrets = SECRET_PARAMS.filter((name) => parsed.searchParams.has(name))
  if (parsed.password === '' && secrets.length === 0) return url
  if (parsed.password !== '') parsed.password = '***'
  for (const name of secrets) parsed.searchParams.set(name, '***')
  return parsed.toString()
}
