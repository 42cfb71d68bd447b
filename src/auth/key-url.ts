/** Whether `url` may be fetched for keys: https, or http to a loopback host (a provider on the same machine). */
export function keyUrlAllowed(url: string): boolean {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return false
  }
  if (parsed.protocol === 'https:') return true
  const host = parsed.hostname.replace(/^\[|\]$/g, '')
  return parsed.protocol === 'http:' && (host === 'localhost' || host === '::1' || /^127\./.test(host))
}
