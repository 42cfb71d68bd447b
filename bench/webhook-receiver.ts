import { createServer, type Server as HttpServer } from 'node:http'
import type { Cleanup } from './cleanup.js'

/**
 * How long the receiver takes to answer each delivery. A receiver that fails (or refuses connections) would all
 * but stop the dispatcher within a minute: each failure doubles the subscription's backoff
 * (src/webhooks/dispatcher.ts; tried with 10 subscriptions refused: 24 attempts in the first 10 s, 3 in the fifth),
 * so the backlog would sit untouched while measured. One that succeeds slowly keeps every subscription ready again
 * at once, so the dispatcher claims and delivers for the whole run, the account's concurrency
 * (PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY, 4) at a time: at most 40 deliveries per second (30 to 35 measured), a
 * sliver of a backlog of hundreds of thousands. 100 ms is an ordinary answer time for a receiver on the internet.
 */
export const RECEIVER_DELAY_MS = 100

export interface WebhookReceiver {
  /** Base URL on loopback; subscriptions point below it. */
  url: string
  /** Deliveries answered so far. */
  received(): number
}

/**
 * The noisy account's webhook receiver, in the harness process on loopback: reads each delivery whole and answers
 * 204 after RECEIVER_DELAY_MS. Stopped by `cleanup`.
 */
export async function startReceiver(cleanup: Cleanup): Promise<WebhookReceiver> {
  let received = 0
  const server: HttpServer = createServer((req, res) => {
    req.resume()
    req.once('end', () => {
      setTimeout(() => {
        received++
        res.writeHead(204).end()
      }, RECEIVER_DELAY_MS)
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  cleanup.add('stop webhook receiver', () => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const address = server.address()
  if (address === null || typeof address !== 'object') throw new Error('webhook receiver: no port')
  return { url: `http://127.0.0.1:${address.port}`, received: () => received }
}
