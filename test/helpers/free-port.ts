import { randomInt } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'

/** The first port of the kernel's ephemeral range (Linux), which listen(0) and outgoing connections draw from. */
function ephemeralStart(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
  } catch {
    return 32768
  }
}

/** Whether a server can listen on `port` on loopback right now. */
function free(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * A loopback port free now, for a server a test stops and starts again on the same port. It lies below the ephemeral
 * range: a port listen(0) handed out could be handed to another test file's server (they run side by side) while
 * this one is down, and a client reconnecting would then reach that one instead.
 */
export async function restartablePort(): Promise<number> {
  const below = ephemeralStart()
  for (let tries = 0; tries < 100; tries++) {
    const port = randomInt(10_000, below)
    if (await free(port)) return port
  }
  throw new Error(`no free loopback port between 10000 and ${below}`)
}
