import { connect } from 'node:net'

/**
 * Writes `chunks` to a raw connection to 127.0.0.1:`port`, `gapMs` apart, and resolves with everything the server
 * sent until it closed the connection (or `closeAfterMs` passed, then the client closes).
 */
export function rawExchange(
  port: number,
  chunks: string[],
  options: { gapMs?: number; closeAfterMs?: number; readAfterMs?: number } = {},
): Promise<{ text: string; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now()
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('utf8')
    const timers: NodeJS.Timeout[] = []
    socket.on('data', (chunk: string) => (text += chunk))
    // A client busy elsewhere: the answers pile up in the kernel until it reads.
    if (options.readAfterMs !== undefined) {
      socket.pause()
      timers.push(setTimeout(() => socket.resume(), options.readAfterMs))
    }
    // A reset after the response is fine: 'close' follows and resolves with what arrived.
    socket.on('error', () => {})
    socket.once('close', () => {
      for (const timer of timers) clearTimeout(timer)
      resolve({ text, ms: performance.now() - started })
    })
    chunks.forEach((chunk, i) => {
      if (!options.gapMs) return void socket.write(chunk)
      timers.push(setTimeout(() => socket.writable && socket.write(chunk), i * options.gapMs))
    })
    if (options.closeAfterMs !== undefined) timers.push(setTimeout(() => socket.destroy(), options.closeAfterMs))
  })
}

/** The status line's code, head and JSON body of the first raw HTTP response in `raw`. */
export function parsed(raw: string): { status: number; body: unknown; head: string } {
  const [head = '', body = ''] = raw.split('\r\n\r\n')
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(body), head }
}

/** The status codes of the HTTP responses in `raw`, in order (a response starts right after the last body). */
export function statusCodes(raw: string): number[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]))
}
