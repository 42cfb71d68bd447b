import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import { CONTROL_FREE_TEXT, textProblem } from '../schemas/text.js'

// Where a webhook must not reach unless the operator allows it: loopback, private, link-local (cloud metadata
// services live there), carrier-grade NAT, unspecified, multicast and reserved ranges, in IPv4 and IPv6.
const PRIVATE = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv4')
}
// IPv6: unspecified, loopback and IPv4-compatible (::/96), NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and 6to4 (2002::/16),
// which embed an IPv4 address, unique-local, site-local, link-local and multicast.
for (const [network, prefix] of [
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['2002::', 16],
  ['fc00::', 7],
  ['fec0::', 10],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv6')
}

/** True when `address` (an IP literal) is one a webhook may not reach without PLANTSTORE_WEBHOOK_ALLOW_PRIVATE. */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1]
  if (mapped !== undefined) return PRIVATE.check(mapped, 'ipv4')
  const family = isIP(address)
  return family === 0 || PRIVATE.check(address, family === 4 ? 'ipv4' : 'ipv6')
}

/** The host of a URL as an address literal would be looked up: without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1')
}

// How long a subscription request may wait for DNS.
const LOOKUP_TIMEOUT_MS = 5000

/** Every address `host` resolves to, or a rejection after LOOKUP_TIMEOUT_MS. */
async function resolve(host: string): Promise<string[]> {
  const timeout = new Promise<never>((_, reject) => {
    setTimeout(() => reject(new Error('DNS lookup timed out')), LOOKUP_TIMEOUT_MS).unref()
  })
  const entries = await Promise.race([lookup(host, { all: true }), timeout])
  return entries.map((entry) => entry.address)
}

/**
 * Why `text` may not be a webhook URL, or undefined when it may: http(s) only, no credentials, at most 2048
 * characters, no control character (the rule of the API's schema, for the CLI), and (unless `allowPrivate`) a host
 * whose every address is public. Checked again at each delivery, since a name can point elsewhere later.
 */
export async function urlProblem(text: string, allowPrivate: boolean): Promise<string | undefined> {
  if (text.length > 2048) return 'is over 2048 characters'
  const characters = textProblem(text, CONTROL_FREE_TEXT)
  if (characters !== undefined) return characters
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'is not a URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be http or https'
  if (url.username !== '' || url.password !== '') return 'must not carry credentials'
  if (allowPrivate) return undefined
  const host = hostOf(url)
  let addresses: string[]
  try {
    addresses = isIP(host) !== 0 ? [host] : await resolve(host)
  } catch {
    return `host ${host} does not resolve`
  }
  const blocked = addresses.find(isPrivateAddress)
  return blocked === undefined ? undefined : `resolves to ${blocked}, a private, loopback or link-local address`
}
