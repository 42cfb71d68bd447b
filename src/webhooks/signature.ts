import { createHmac } from 'node:crypto'

/**
 * The Standard Webhooks headers of one attempt: `webhook-id` (the event's, the same on every attempt),
 * `webhook-timestamp` (seconds) and `webhook-signature`, `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`
 * keyed with the secret's bytes (the base64 after `whsec_`).
 */
export function signatureHeaders(secret: string, eventId: string, body: string, now = Date.now()) {
  const timestamp = String(Math.floor(now / 1000))
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const signature = createHmac('sha256', key).update(`${eventId}.${timestamp}.${body}`).digest('base64')
  return { 'webhook-id': eventId, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` }
}
