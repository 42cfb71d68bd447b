import type { Socket } from 'node:net'

/** How long a connection the service ends may still deliver its last answers before it is cut. */
export const LINGER_MS = 1000

/**
 * Makes the close that follows this socket's `Connection: close` answer a lingering one. Node closes the socket as
 * soon as the last answer is handed to the kernel; with requests from the client still unread, Linux then resets the
 * connection and drops every answer the client's receive window had not yet taken (a pipelining client that was
 * slow to read got 2 of its 16 pages, and not the 429 saying why). Lingering instead: read nothing more (what the
 * client still sends waits in the kernel, bounded by its buffer), end with FIN after the answers, and close after
 * LINGER_MS. The connection stays counted against its caps until then.
 */
export function lingerOnClose(socket: Socket, ms = LINGER_MS): void {
  // Node's HTTP server calls destroySoon after an answer that ends the connection.
  socket.destroySoon = () => {
    socket.pause()
    socket.end()
    const timer = setTimeout(() => socket.destroy(), ms)
    socket.once('close', () => clearTimeout(timer))
  }
}
