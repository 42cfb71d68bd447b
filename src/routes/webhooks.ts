import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { callerOf } from '../auth/caller.js'
import { ApiError } from '../errors.js'
import {
  CreatedSubscription,
  NewSubscriptionBody,
  SUBSCRIPTION_EXAMPLE,
  SubscriptionParams,
  SubscriptionShape,
} from '../schemas/webhook.js'
import type { Subscription, WebhookStore } from '../storage/index.js'
import type { EventType } from '../webhooks/events.js'
import { subscribe } from '../webhooks/subscribe.js'
import { urlProblem } from '../webhooks/url-policy.js'
import type { IdempotencyHooks } from '../plugins/idempotency.js'
import { IdempotencyHeaders, REPLAYED_HEADERS } from '../schemas/idempotency-key.js'
import { creationErrorResponses, errorResponses, withExamples } from './error-responses.js'
import { SECURITY as security } from './security.js'

const tags = ['webhooks']

function shape(subscription: Subscription) {
  return {
    id: subscription.id,
    url: subscription.url,
    // Storage holds only types a subscription was made with, which the schema allowed.
    events: subscription.eventTypes as EventType[],
    createdAt: subscription.createdAt.toISOString(),
    status: subscription.state,
    disabledReason: subscription.disabledReason,
    disabledAt: subscription.disabledAt?.toISOString() ?? null,
    queued: subscription.queued,
    failingSince: subscription.failingSince?.toISOString() ?? null,
  }
}

/** POST /webhooks, GET /webhooks, DELETE /webhooks/{id}: the caller account's own subscriptions. */
export const webhookRoutes: FastifyPluginAsyncTypebox<{
  webhooks: WebhookStore
  allowPrivate: boolean
  /** Claims, keeps and replays the Idempotency-Key of POST /webhooks. */
  idempotency: IdempotencyHooks
}> = async (app, { webhooks, allowPrivate, idempotency }) => {
  app.post(
    '/webhooks',
    {
      config: { scope: 'webhooks:manage' },
      // Route-level, so after validation: only a valid request claims its key.
      preHandler: idempotency.preHandler,
      onSend: idempotency.onSend,
      schema: {
        operationId: 'createWebhook',
        tags,
        summary: 'Subscribe to webhook events',
        description:
          "Events of the caller's account are POSTed to `url`, signed as Standard Webhooks (see the `webhooks` section). The answer holds the signing secret, shown only this once. An account holding its quota of subscriptions (10 by default) gets 409 (40902). With an `Idempotency-Key`, a retry by the same token gets the first answer again, secret included: that answer is kept as long as the key.",
        security,
        headers: IdempotencyHeaders,
        body: NewSubscriptionBody,
        response: {
          201: { ...CreatedSubscription, description: 'Subscribed; keep the secret', headers: REPLAYED_HEADERS },
          ...creationErrorResponses('quotaExceeded', 'idempotencyKeyInUse', 'idempotencyKeyReused'),
        },
      },
    },
    async (request, reply) => {
      const { url, events } = request.body
      const problem = await urlProblem(url, allowPrivate)
      if (problem !== undefined) {
        // The tenant gets the public message; which host and why is for the operator (never the URL's query).
        request.log.info({ reason: problem.detail }, 'webhook URL refused')
        throw new ApiError('validation', `body.url: ${problem.message}`)
      }
      const { secret, subscription } = await subscribe(webhooks, {
        accountName: callerOf(request).accountName,
        url,
        eventTypes: events,
      })
      return reply.code(201).send({ ...shape(subscription), secret })
    },
  )

  app.get(
    '/webhooks',
    {
      config: { scope: 'webhooks:manage' },
      schema: {
        operationId: 'listWebhooks',
        tags,
        summary: 'List webhook subscriptions',
        description: "The caller's account's subscriptions, oldest first; never their secrets.",
        security,
        response: {
          200: withExamples(
            Type.Array(Type.Ref(SubscriptionShape)),
            { one: { summary: 'One subscription', value: [SUBSCRIPTION_EXAMPLE] } },
            { description: 'Subscriptions' },
          ),
          ...errorResponses('unavailable'),
        },
      },
    },
    async (request) => (await webhooks.listSubscriptions({ accountId: callerOf(request).accountId })).map(shape),
  )

  app.delete(
    '/webhooks/:id',
    {
      config: { scope: 'webhooks:manage' },
      schema: {
        operationId: 'deleteWebhook',
        tags,
        summary: 'Remove a webhook subscription',
        description:
          'Stops its deliveries, including events not yet delivered. 404 when the account has no such subscription.',
        security,
        params: SubscriptionParams,
        response: {
          204: Type.Null({ description: 'Subscription removed' }),
          ...errorResponses('validation', 'subscriptionNotFound', 'unavailable'),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params
      if (!(await webhooks.deleteSubscription(id, callerOf(request).accountId))) {
        throw new ApiError('subscriptionNotFound', `no webhook subscription with id ${id}`)
      }
      return reply.code(204).send(null)
    },
  )

  app.post(
    '/webhooks/:id/enable',
    {
      config: { scope: 'webhooks:manage' },
      schema: {
        operationId: 'enableWebhook',
        tags,
        summary: 'Enable a disabled webhook subscription',
        description:
          'Delivery resumes with the events made from now on (those made while it was disabled are not delivered; ' +
          'its failed deliveries stay failed). Its failure count and give-up clock start over. Enabling an active ' +
          'subscription changes nothing. 404 when the account has no such subscription.',
        security,
        params: SubscriptionParams,
        response: {
          200: withExamples(
            Type.Ref(SubscriptionShape),
            { enabled: { summary: 'Enabled again', value: SUBSCRIPTION_EXAMPLE } },
            { description: 'The subscription, active' },
          ),
          ...errorResponses('validation', 'subscriptionNotFound', 'unavailable'),
        },
      },
    },
    async (request) => {
      const { id } = request.params
      const subscription = await webhooks.enableSubscription(id, callerOf(request).accountId)
      if (subscription === undefined)
        throw new ApiError('subscriptionNotFound', `no webhook subscription with id ${id}`)
      return shape(subscription)
    },
  )
}
