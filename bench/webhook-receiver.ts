import { createServer, type Server as HttpServer } from 'node:http'
import type { Cleanup } from './cleanup.js'

/**
 * How long the receiver takes to answer each delivery. A failing receiver would all but stop the dispatcher within a
 * minute (each failure doubles the subscription's backoff), leaving the backlog untouched while measured; one that
 * succeeds slowly keeps every subscription ready, so the dispatcher claims and delivers for the whole run, the
 * account's concurrency (4) at a time. 100 ms is an ordinary answer time for a receiver on the internet.
 */
export const RECEIVER_DELAY_MS = 100

export interface WebhookReceiver {
  /** Base URL on loopback; subscriptions point below it. */
  url: string
}

/**
 * The noisy account's webhook receiver, in the harness process on loopback: reads each delivery whole and answers
 * 204 after RECEIVER_DELAY_MS. Stopped by `cleanup`.
 */
export async function startReceiver(cleanup: Cleanup): Promise<WebhookReceiver> {
  const server: HttpServer = createServer((req, res) => {
    req.resume()
    req.once('end', () => {
      setTimeout(() => {
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
  return { url: `http://127.0.0.1:${address.port}` }
}
