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
