import type { FastifyInstance } from 'fastify'
import type { WebhookStore } from '../storage/index.js'
import { WebhookDispatcher, type DispatcherOptions } from '../webhooks/dispatcher.js'
import type { Metrics } from './metrics.js'

/** Delivery settings the host chooses; the rest comes from the app. */
export type DeliverySettings = Omit<DispatcherOptions, 'allowPrivate' | 'onAttempt' | 'onError' | 'traceAttempt'>

/** Runs a webhook dispatcher while the app serves: started once listening, stopped (attempts finished) on close. */
export function registerWebhookDispatcher(
  app: FastifyInstance,
  webhooks: WebhookStore,
  settings: DeliverySettings & Pick<DispatcherOptions, 'allowPrivate' | 'traceAttempt'>,
  metrics: Metrics,
): void {
  // One warning per outage, not one per poll.
  let failing = false
  const dispatcher = new WebhookDispatcher(webhooks, {
    ...settings,
    onAttempt: (outcome, seconds, age) => {
      failing = false
      metrics.webhookAttempt(outcome, seconds, age)
    },
    onError: (err) => {
      if (!failing) app.log.warn({ err }, 'webhook outbox unavailable; deliveries wait')
      failing = true
    },
  })
  // Not on ready: a start that fails to listen must not leave a dispatcher polling a closed store.
  app.addHook('onListen', async () => dispatcher.start())
  app.addHook('onClose', async () => dispatcher.stop())
}
