import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'

/** One request a receiver got. */
export interface Received {
  path: string
  headers: IncomingHttpHeaders
  body: string
  /** The status it was answered with; undefined when left hanging. */
  status?: number
}

/** How the receiver answers a request: a status, after a delay, or never (the connection hangs). */
export type Answer = { status: number; delayMs?: number; headers?: Record<string, string>; body?: string } | 'hang'

/** A real HTTP receiver on loopback that records what it gets and answers as told. */
export interface Receiver {
  url: string
  received: Received[]
  /** Decides each answer; 200 at once by default. */
  answer: (request: Received, index: number) => Answer
  /** Resolves once `count` requests have arrived, or rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>
  close(): Promise<void>
}

/** Starts a receiver on 127.0.0.1 and a free port. */
export async function startReceiver(): Promise<Receiver> {
  const waiters = new Set<() => void>()
  const receiver: Receiver = {
    url: '',
    received: [],
    answer: () => ({ status: 200 }),
    waitFor(count, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (receiver.received.length < count) return
          clearTimeout(timer)
          waiters.delete(check)
          resolve(receiver.received)
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`receiver got ${receiver.received.length} of ${count} requests within ${timeoutMs} ms`))
        }, timeoutMs)
        waiters.add(check)
        check()
      })
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => (body += chunk))
    req.on('end', () => {
      const request: Received = { path: req.url ?? '', headers: req.headers, body }
      const answer = receiver.answer(request, receiver.received.length)
      if (answer !== 'hang') request.status = answer.status
      receiver.received.push(request)
      for (const waiter of [...waiters]) waiter()
      if (answer === 'hang') return
      setTimeout(
        () => res.writeHead(answer.status, answer.headers).end(answer.body ?? 'receiver says hi'),
        answer.delayMs ?? 0,
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  // Hanging answers must not keep the test process alive.
  server.unref()
  return receiver
}

/** Checks a request's Standard Webhooks signature with the reference library; returns the verified body. */
export function verified(secret: string, request: Received): unknown {
  const headers = Object.fromEntries(
    ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [name, String(request.headers[name])]),
  )
  return new Webhook(secret).verify(request.body, headers)
}
