import { BlockList, isIP } from 'node:net'

const family = (address: string) => (isIP(address) === 6 ? 'ipv6' : 'ipv4')

/**
 * Whether a connection's TCP peer is a proxy TRUST_PROXY trusts (Fastify's trustProxy forms). With `true`, or a hop
 * count of 1 or more, every peer is: both say the service is reached only through proxies (a hop count trusts the
 * nearest hops whatever their address). With a list, its addresses and CIDRs are; an IPv4-mapped IPv6 peer matches its
 * IPv4 entry.
 */
export function trustedPeer(trust: boolean | number | string | undefined): (address: string) => boolean {
  if (trust === true || (typeof trust === 'number' && trust > 0)) return () => true
  if (typeof trust !== 'string') return () => false
  const proxies = new BlockList()
  for (const entry of trust.split(',')) {
    const [address = '', prefix] = entry.trim().split('/')
    if (prefix === undefined) proxies.addAddress(address, family(address))
    else proxies.addSubnet(address, Number(prefix), family(address))
  }
  return (address) => proxies.check(address, family(address))
}
