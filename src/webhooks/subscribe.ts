import type { Subscription, WebhookStore } from '../storage/index.js'
import { EVENT_TYPES, newSigningSecret, newSubscriptionId, type EventType } from './events.js'

/** What a new subscription is for; the events default to every type. The URL must already be checked. */
export interface SubscriptionRequest {
  accountName: string
  url: string
  eventTypes?: readonly EventType[]
}

/** Stores a subscription with a fresh id and signing secret; the secret is returned this once. */
export async function subscribe(
  webhooks: WebhookStore,
  request: SubscriptionRequest,
): Promise<{ secret: string; subscription: Subscription }> {
  const secret = newSigningSecret()
  const subscription = await webhooks.createSubscription({
    id: newSubscriptionId(),
    accountName: request.accountName,
    url: request.url,
    secret,
    eventTypes: [...new Set(request.eventTypes ?? EVENT_TYPES)],
  })
  return { secret, subscription }
}
