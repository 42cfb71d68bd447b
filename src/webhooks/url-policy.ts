import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import { CONTROL_FREE_TEXT, textProblem } from '../text-rules.js'

// Where a webhook must not reach unless the operator allows it: every address the IANA special-purpose registries
// do not mark globally reachable, and multicast. IPv4: loopback, private, link-local (cloud metadata services live
// there), carrier-grade NAT, "this network", IETF protocol assignments, documentation (TEST-NET-1, -2 and -3),
// the deprecated 6to4 relay anycast, benchmarking, multicast and reserved (broadcast included).
const PRIVATE_IPV4 = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  PRIVATE_IPV4.addSubnet(network, prefix, 'ipv4')
}
// IPv6: only global unicast (2000::/3) is reachable, so everything outside it is refused: unspecified, loopback,
// IPv4-compatible, NAT64, discard-only (100::/64), the dummy prefix, SRv6 SIDs (5f00::/16), unique-local,
// site-local, link-local and multicast among them. Inside it: the IETF protocol assignments (2001::/23: Teredo,
// which embeds an IPv4 address, benchmarking, and anycast services no webhook receiver lives on), documentation
// (2001:db8::/32, 3fff::/20) and 6to4 (2002::/16), which embeds an IPv4 address. IPv4-mapped addresses
// (::ffff:0:0/96) are checked as the IPv4 address they carry, in the IPv4 list. The lists are apart because a
// BlockList checks an IPv4 address against its IPv6 rules too, as ::ffff:a.b.c.d, which ::/3 would refuse.
const PRIVATE_IPV6 = new BlockList()
for (const [network, prefix] of [
  ['::', 3],
  ['4000::', 2],
  ['8000::', 1],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
] as const) {
  PRIVATE_IPV6.addSubnet(network, prefix, 'ipv6')
}

/** The IPv4 address an IPv4-mapped IPv6 address carries, in either form (::ffff:7f00:1, ::ffff:127.0.0.1). */
function mappedIPv4(address: string): string | undefined {
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1]
  if (dotted !== undefined) return dotted
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address)
  if (hex === null) return undefined
  const [high, low] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)]
  return [high >> 8, high & 255, low >> 8, low & 255].join('.')
}

/** True when `address` (an IP literal) is one a webhook may not reach without PLANTSTORE_WEBHOOK_ALLOW_PRIVATE. */
export function isPrivateAddress(address: string): boolean {
  const mapped = mappedIPv4(address)
  // A BlockList answers false for text that is no address at all: anything unparseable counts as private.
  if (mapped !== undefined) return isIP(mapped) !== 4 || PRIVATE_IPV4.check(mapped, 'ipv4')
  const family = isIP(address)
  if (family === 4) return PRIVATE_IPV4.check(address, 'ipv4')
  return family === 0 || PRIVATE_IPV6.check(address, 'ipv6')
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
    setTimeout(() => reject(new Error('timed out')), LOOKUP_TIMEOUT_MS).unref()
  })
  const entries = await Promise.race([lookup(host, { all: true }), timeout])
  return entries.map((entry) => entry.address)
}

/** Why a URL is refused: `message` for whoever sent it, `detail` for the operator (the server log, the CLI). */
export interface UrlProblem {
  message: string
  detail: string
}

// What the sender of a URL is told of any host that is not public, whatever the reason: were a name that does not
// resolve told apart from one that resolves to a private address (or that address shown), a tenant could map the
// operator's internal names through POST /webhooks.
const NOT_PUBLIC = 'must name a host that resolves to public addresses only'

/**
 * The URL `text` names as a webhook's target, or why it cannot be one: a URL, http(s), without credentials (sent as
 * `Authorization: Basic`, and shown wherever the URL is). Delivery applies this part alone to what a store holds:
 * the rest of the rule (length, characters) concerns new URLs only.
 */
export function webhookTarget(text: string): URL | string {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'is not a URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be http or https'
  if (url.username !== '' || url.password !== '') return 'must not carry credentials'
  return url
}

/** The URL `text` names, or why it may not be a webhook URL (nothing the sender does not know already). */
function parse(text: string): URL | string {
  if (text.length > 2048) return 'is over 2048 characters'
  return textProblem(text, CONTROL_FREE_TEXT) ?? webhookTarget(text)
}

/**
 * Why `text` may not be a webhook URL by its form, or undefined when it may: the rule every way in applies (the
 * API and webhooks add through urlProblem, import directly), so that a store never holds a URL the API refuses.
 */
export function urlFormProblem(text: string): string | undefined {
  const url = parse(text)
  return typeof url === 'string' ? url : undefined
}

/**
 * Why a stored URL may not be a webhook's, for import: the form rule (urlFormProblem) and, unless `allowPrivate`, a
 * host written as a private address. A name is not looked up: what it resolves to depends on where and when the
 * import runs (a store moved to a host without that DNS), and delivery checks the address it connects to anyway.
 */
export function storedUrlProblem(text: string, allowPrivate: boolean): string | undefined {
  const url = parse(text)
  if (typeof url === 'string') return url
  const host = hostOf(url)
  if (allowPrivate || isIP(host) === 0 || !isPrivateAddress(host)) return undefined
  return `host ${host} is not a public address (PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it)`
}

/** Why `host` is not public, for the operator's eyes only, or undefined when every address it resolves to is. */
async function hostProblem(host: string): Promise<string | undefined> {
  if (isIP(host) !== 0) return isPrivateAddress(host) ? `host ${host} is not a public address` : undefined
  let addresses: string[]
  try {
    addresses = await resolve(host)
  } catch (err) {
    return `host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`
  }
  const blocked = addresses.find(isPrivateAddress)
  return blocked === undefined ? undefined : `host ${host} resolves to ${blocked}, which is not a public address`
}

/**
 * Why `text` may not be a webhook URL, or undefined when it may: http(s) only, no credentials, at most 2048
 * characters, no control character (the rule of the API's schema, for the CLI), and (unless `allowPrivate`) a host
 * whose every address is public. The sender is told the same of every host that is not public; the detail says
 * which address, or that there is none. Delivery checks the address again (send.ts), since a name can point
 * elsewhere later.
 */
export async function urlProblem(text: string, allowPrivate: boolean): Promise<UrlProblem | undefined> {
  const url = parse(text)
  if (typeof url === 'string') return { message: url, detail: url }
  if (allowPrivate) return undefined
  const detail = await hostProblem(hostOf(url))
  return detail === undefined ? undefined : { message: NOT_PUBLIC, detail }
}
