import { isIP } from 'node:net'

/** Whether `url` may be fetched for keys: https, or http to a loopback address (a provider on the same machine). */
export function keyUrlAllowed(url: string): boolean {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return false
  }
  if (parsed.protocol === 'https:') return true
  if (parsed.protocol !== 'http:') return false
  const host = parsed.hostname.replace(/^\[|\]$/g, '')
  // An address, not a name that merely starts with 127. (127.example.com resolves wherever its owner likes).
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'))
}

/** Whether a bearer value is a JWS in compact form: three base64url parts joined by dots. */
export function looksLikeJwt(value: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value)
}
