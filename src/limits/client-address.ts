import { isIPv6 } from 'node:net'
import { Address6 } from 'ip-address'

/** One IPv6 client usually holds a whole /64: counted by it, each of its addresses would get a budget of its own. */
const IPV6_CLIENT_PREFIX = 64

function normalized(address: string): string {
  if (!isIPv6(address)) return address.toLowerCase()
  const v6 = new Address6(address)
  if (v6.isMapped4()) return v6.to4().correctForm()
  return new Address6(`${address}/${IPV6_CLIENT_PREFIX}`).startAddress().correctForm()
}

// The last answer is kept: consecutive requests mostly come from one address (a connection's, a proxy's client's),
// and parsing an IPv6 address is not free.
let lastAddress = ''
let lastKey = ''

/** The key a client is counted under by every per-address limit: its address, an IPv6 one by its /64. */
export function addressKey(address: string): string {
  if (address !== lastAddress) {
    lastKey = normalized(address)
    lastAddress = address
  }
  return lastKey
}
