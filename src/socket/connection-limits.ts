import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import type { ConnectionLimits } from '../config.js'
import { ApiError } from '../errors.js'
import { addressKey } from '../limits/client-address.js'
import { retryAfter, tooManyRequests } from '../limits/too-many.js'
import { rawErrorResponse } from './raw-response.js'
import { writeStallWatch } from './write-stall.js'

/** Which cap refused a connection: the client address's or the server's. */
export type ConnectionCap = 'address' | 'server'

/** The caps, and what they need to know from the app. */
export interface ConnectionLimitOptions extends ConnectionLimits {
  /** Peers not capped per address: trusted proxies, behind which every client shares the proxy's address. */
  uncapped: (address: string) => boolean
  /** Told of every refused connection. */
  onRefused: (cap: ConnectionCap) => void
  /** Told of every connection closed because its answers stopped leaving. */
  onStalled: () => void
}

// A refused connection is answered, then read and dropped for at most this long before it is closed: closing it with
// the client's request unread would reset it, and a reset can destroy the answer before the client reads it.
const LINGER_MS = 1000
// Past this many refused connections lingering at once, one more is closed without an answer, so that refusals
// cannot pile up open files either.
const MAX_LINGERING = 1024

/**
 * Puts `admit` in front of the HTTP server's own connection handling, so a refused socket never reaches Node's HTTP
 * parser: the server's 'connection' listeners (Node's, added when Fastify created the server) are taken off and
 * called for admitted sockets only.
 */
function gate(server: Server, admit: (socket: Socket) => boolean): void {
  const listeners = server.listeners('connection') as Array<(socket: Socket) => void>
  server.removeAllListeners('connection')
  server.on('connection', (socket: Socket) => {
    if (!admit(socket)) return
    for (const listener of listeners) listener.call(server, socket)
  })
}

/** Answers refused sockets in the Error shape (no request is read first) and closes them, bounded as said above. */
function refuser(): (socket: Socket, refusal: ApiError) => void {
  let lingering = 0
  return (socket, refusal) => {
    socket.on('error', () => {})
    if (lingering >= MAX_LINGERING) return void socket.destroy()
    lingering++
    const timer = setTimeout(() => socket.destroy(), LINGER_MS)
    socket.once('close', () => {
      lingering--
      clearTimeout(timer)
    })
    socket.once('end', () => socket.destroy())
    socket.end(rawErrorResponse(refusal.kind, refusal.message, refusal.headers))
    socket.resume()
  }
}

/**
 * Caps open connections per process (`max`, then 503) and per client address (`perAddress`, then 429), counting at
 * accept, before a byte is read, and closes an admitted connection whose answers sit unread (`writeStallMs`): without
 * them, connections were unlimited, and each one that pipelines requests and reads no answer held its answers in
 * memory for as long as it stayed open. The address is the TCP peer's: behind a proxy every client shares the
 * proxy's, so trusted proxies are only capped by `max` (per-client caps belong on the proxy). Returns a reading of
 * the connections open now, for the metrics. Each refusal is logged with the peer's address and the cap.
 */
export function registerConnectionLimits(app: FastifyInstance, options: ConnectionLimitOptions): () => number {
  let open = 0
  const perAddress = new Map<string, number>()
  const refuse = refuser()
  const stalls = writeStallWatch(options.writeStallMs, options.onStalled)
  app.addHook('onClose', (_app, done) => {
    stalls.stop()
    done()
  })
  gate(app.server, (socket) => {
    const address = socket.remoteAddress
    // Undefined once the client has gone again: nothing to count or answer.
    if (address === undefined) {
      socket.destroy()
      return false
    }
    if (open >= options.max) {
      options.onRefused('server')
      // The TCP peer's address: no request has been read, so no X-Forwarded-For either.
      app.log.info({ client: address, cap: 'server' }, 'connection refused')
      const message = `this instance has ${options.max} open connections; retry shortly or on another`
      refuse(socket, new ApiError('atCapacity', message, retryAfter(1000)))
      return false
    }
    const key = options.uncapped(address) ? undefined : addressKey(address)
    const count = key === undefined ? 0 : (perAddress.get(key) ?? 0)
    if (key !== undefined && count >= options.perAddress) {
      options.onRefused('address')
      app.log.info({ client: address, cap: 'address' }, 'connection refused')
      const message =
        count === 1
          ? '1 connection from this address is open; close it first'
          : `${count} connections from this address are open; close one first`
      refuse(socket, tooManyRequests('tooManyConnections', message, 1000))
      return false
    }
    open++
    if (key !== undefined) perAddress.set(key, count + 1)
    stalls.watch(socket)
    socket.once('close', () => {
      open--
      if (key === undefined) return
      const left = perAddress.get(key)! - 1
      if (left === 0) perAddress.delete(key)
      else perAddress.set(key, left)
    })
    return true
  })
  return () => open
}
