import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

/** A loopback TCP proxy to a real server that a test can cut (database down) and restore. */
export interface TcpProxy {
  port: number
  /** Drops every connection and refuses new ones. */
  cut(): Promise<void>
  /** Accepts connections again, on the same port. */
  restore(): Promise<void>
  close(): Promise<void>
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port))
  })
}

/** Starts a proxy on a free port forwarding to `host:port`. */
export async function startTcpProxy(host: string, port: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>()
  const track = (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  }
  const newServer = () =>
    createServer((client) => {
      const upstream = connect(port, host)
      track(client)
      track(upstream)
      client.pipe(upstream).pipe(client)
      client.once('error', () => upstream.destroy())
      upstream.once('error', () => client.destroy())
    })
  let server = newServer()
  const proxyPort = await listen(server, 0)
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy()
      server.close(() => resolve())
    })
  return {
    port: proxyPort,
    cut: stop,
    async restore() {
      server = newServer()
      await listen(server, proxyPort)
    },
    close: () => (server.listening ? stop() : Promise.resolve()),
  }
}
