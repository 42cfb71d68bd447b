import { Socket } from 'node:net'
import { StorageUnavailableError } from '../types.js'
import { guard } from './errors.js'

/** One `host:port` of a DATABASE_URL. */
export interface HostAddress {
  host: string
  port: number
}

/**
 * The hosts of a URL that names several (`postgres://user@h1:5432,h2:5433/db`), in order; undefined for one host.
 * A host without a port gets PGPORT's, or 5432.
 */
export function hostList(url: string): HostAddress[] | undefined {
  const authority = url.slice(url.indexOf('://') + 3).split(/[/?]/)[0] ?? ''
  const hosts = decodeURIComponent(authority.slice(authority.lastIndexOf('@') + 1))
  if (!hosts.includes(',')) return undefined
  const defaultPort = Number(process.env.PGPORT || 5432)
  return hosts.split(',').map((entry) => {
    const [host = '', port] = entry.split(':')
    return { host, port: port ? Number(port) : defaultPort }
  })
}

/**
 * A session that ends this soon after its connection opened was refused by the host: by the client because the
 * server is a standby (target_session_attrs), or by the server (starting, shutting down, out of connections).
 */
const REFUSED_WITHIN_MS = 2000

/** The sockets of one pool, and how it says it is closing them. */
export interface PoolSockets {
  /** A socket connecting to the rotation's current host, for postgres.js's `socket` option. */
  socket: () => Socket
  /** Called as the pool ends: the closes of its sockets from then on are its own, not the host's refusal. */
  ending: () => void
}

/**
 * A socket that tells when it opened and closed through its own events, not listeners: postgres.js removes every
 * listener of a socket it starts TLS on.
 */
class WatchedSocket extends Socket {
  #openedAt: number | undefined

  constructor(private readonly onClose: (openedAt: number | undefined) => void) {
    super()
  }

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'connect') this.#openedAt = performance.now()
    else if (event === 'close') this.onClose(this.#openedAt)
    return super.emit(event, ...args)
  }
}

/**
 * Connections for a pool over several hosts, one host per connection attempt: the host that last worked, or, once
 * an attempt on it fails, the next one in the list.
 *
 * postgres.js's own multi-host handling is not used. In 3.4.9, while no host is acceptable (the primary down, the
 * standby not yet promoted), one connection attempt goes round the hosts again and again without a pause and
 * without end: its connect timeout starts over at each host, and the check meant to give up after the last host
 * never does. A request waited until a host was promoted, which may be never, and the standby got a new session
 * some 30 times a second for each connection waiting (measured here with PostgreSQL 15 on loopback). Here the client is given one host and this socket: an attempt that fails fails its request
 * (503) at once, and the client's backoff (at most half a second; client.ts) spaces the next.
 *
 * Whether an attempt failed is read from its socket alone, which works under TLS too: it never opened, or it closed
 * within REFUSED_WITHIN_MS of opening. A session that worked and ended early for another reason (the server crashed
 * just then) moves the pool on too; if the next host is no better, its attempt fails and the pool moves on again.
 * A pool's own end does not: a short-lived pool (the bootstrap token's) closing its session moved every pool of the
 * process to the standby, and the next connection's first request answered 503.
 */
export class HostRotation {
  #current = 0
  readonly #moved = new Set<() => void>()

  constructor(private readonly hosts: readonly HostAddress[]) {}

  /** How many hosts it goes round. */
  get size(): number {
    return this.hosts.length
  }

  /** The host the next connection dials. */
  get current(): HostAddress {
    return this.hosts[this.#current]!
  }

  /**
   * Resolves once the next connection would dial another host than `host`, or after `ms`. A statement refused on a
   * host fails a moment before that host's socket closes, which is what moves the rotation on.
   */
  movedOn(host: HostAddress, ms: number): Promise<void> {
    if (this.current !== host) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.#moved.delete(done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.#moved.add(done)
    })
  }

  /** The first host, for the client's own settings and error messages. */
  get first(): HostAddress {
    return this.hosts[0]!
  }

  /** Sockets for one pool, whose closes once it ends move nothing. */
  forPool(): PoolSockets {
    let ending = false
    return {
      socket: () => this.#dial(() => ending),
      ending: () => {
        ending = true
      },
    }
  }

  /** A socket connecting to the current host; its close moves the rotation on if it looks refused, unless `ours`. */
  #dial(ours: () => boolean): Socket {
    const index = this.#current
    const { host, port } = this.hosts[index]!
    const socket = new WatchedSocket((openedAt) => {
      const refused = openedAt === undefined || performance.now() - openedAt < REFUSED_WITHIN_MS
      if (!refused || ours() || this.#current !== index) return
      this.#current = (index + 1) % this.hosts.length
      for (const done of this.#moved) done()
    })
    // The client names the server for TLS (SNI, certificate check) and in its errors by these, as on its own sockets.
    Object.assign(socket, { host, port })
    return socket.connect(port, host)
  }
}

// One per host list in a process: every pool on those hosts (the service's, the bootstrap token's own) dials the host
// that last worked for any of them.
const rotations = new Map<string, HostRotation>()

/** The process's HostRotation over the hosts `url` names, or undefined when it names one. */
export function hostRotation(url: string): HostRotation | undefined {
  const hosts = hostList(url)
  if (hosts === undefined) return undefined
  const key = hosts.map(({ host, port }) => `${host}:${port}`).join(',')
  let rotation = rotations.get(key)
  if (rotation === undefined) rotations.set(key, (rotation = new HostRotation(hosts)))
  return rotation
}

/**
 * Runs the first statements, once more per further host while storage is unavailable: with several hosts, the first
 * may refuse (a standby, the old primary), which fails that attempt and moves the pool on to the next (see above).
 */
export async function onEachHost<T>(rotation: HostRotation | undefined, work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const host = rotation?.current
    try {
      return await guard(work)
    } catch (err) {
      if (!(err instanceof StorageUnavailableError) || rotation === undefined || attempt >= rotation.size) throw err
      // Not the refusing host again: another pooled connection could dial it before its socket has closed.
      await rotation.movedOn(host!, 2000)
    }
  }
}
