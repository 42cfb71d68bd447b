import type { Socket } from 'node:net'

/** Watches sockets for output that stopped leaving. */
export interface WriteStallWatch {
  watch(socket: Socket): void
  stop(): void
}

// Per socket: bytes whose write had completed at the last sweep, and the sweep time since when output has waited
// without that number moving (0: nothing waiting).
interface Progress {
  sent: number
  since: number
}

/**
 * Closes a connection whose answers stopped leaving: output waits in its socket and no write to it has completed
 * for `stallMs`, which is what a client that reads nothing looks like once the kernel's buffers are full. Node's own
 * timeouts do not fit: server.timeout counts any inactivity (a slow handler would trip it) and keep-alive timing
 * starts only after an answer is written. A slow reader is not a stall: each write it lets complete resets the clock.
 * A sweep checks every socket (as Node does for the headers timeout) every quarter of `stallMs`, at most every
 * second, so a connection is closed between `stallMs` and `stallMs` plus two sweeps after its output stopped moving.
 * The close is a reset, which also frees what the kernel still holds for the connection.
 */
export function writeStallWatch(stallMs: number, onStall: () => void): WriteStallWatch {
  const sockets = new Map<Socket, Progress>()
  const every = Math.min(1000, Math.max(25, Math.floor(stallMs / 4)))
  let timer: NodeJS.Timeout | undefined
  const sweep = () => {
    const now = Date.now()
    for (const [socket, progress] of sockets) {
      if (socket.writableLength === 0) {
        progress.since = 0
        continue
      }
      // bytesWritten counts every byte handed to the socket; writableLength those whose write has not completed.
      const sent = socket.bytesWritten - socket.writableLength
      if (progress.since === 0 || sent !== progress.sent) {
        progress.sent = sent
        progress.since = now
      } else if (now - progress.since >= stallMs) {
        sockets.delete(socket)
        onStall()
        socket.resetAndDestroy()
      }
    }
  }
  return {
    watch(socket) {
      sockets.set(socket, { sent: 0, since: 0 })
      socket.once('close', () => sockets.delete(socket))
      timer ??= setInterval(sweep, every).unref()
    },
    stop() {
      clearInterval(timer)
    },
  }
}
