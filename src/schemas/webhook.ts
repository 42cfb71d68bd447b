import { Type, type Static } from '@sinclair/typebox'
import { EVENT_TYPES } from '../webhooks/events.js'
import { CONTROL_FREE_TEXT } from '../text-rules.js'
import { Text } from './text.js'

const events = Type.Array(Type.Union(EVENT_TYPES.map((type) => Type.Literal(type))), {
  minItems: 1,
  uniqueItems: true,
  description: 'Event types to receive: plant.created (body: the NewPlant) and plant.deleted (body: {id})',
})
const id = Type.String({ pattern: '^whk_[0-9a-f]{16}$', description: 'Subscription id' })
const urlOptions = {
  minLength: 1,
  maxLength: 2048,
  description:
    'http(s) URL the events are POSTed to; addresses that are not public (private, loopback, link-local, documentation, reserved) are refused',
}
const url = Type.String(urlOptions)
// Operators read URLs in a terminal (plantstore webhooks list), so a new one may carry no control character. Only
// what is sent is checked, not what is answered: rows stored before this rule may still hold one.
const newUrl = Text(
  { ...urlOptions, description: `${urlOptions.description}; no control characters` },
  CONTROL_FREE_TEXT,
)

/** What a client sends to subscribe. */
export const NewSubscriptionBody = Type.Object(
  { url: newUrl, events: Type.Optional({ ...events, description: `${events.description}; both when absent` }) },
  {
    title: 'NewWebhookSubscription',
    additionalProperties: false,
    examples: [{ url: 'https://example.com/plantstore/events', events: ['plant.created', 'plant.deleted'] }],
  },
)
export type NewSubscriptionBody = Static<typeof NewSubscriptionBody>

const nullableTime = (description: string) =>
  Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description })

// Where delivery stands: whether it is on, why not, and what waits.
const health = {
  status: Type.Union([Type.Literal('active'), Type.Literal('disabled')], {
    description:
      'disabled: no events are queued for it nor delivered until it is enabled again (POST /webhooks/{id}/enable)',
  }),
  disabledReason: Type.Union([Type.Literal('failing'), Type.Literal('backlog'), Type.Null()], {
    description:
      'failing: every attempt failed for the give-up period (24 h by default); backlog: its queue reached the cap ' +
      '(10,000 deliveries by default). Its queued deliveries were failed then.',
  }),
  disabledAt: nullableTime('When it was disabled; null while active'),
  queued: Type.Integer({ minimum: 0, description: 'Deliveries waiting to be made' }),
  failingSince: nullableTime('Since when its attempts have failed without a success in between; null otherwise'),
}

/** A subscription as the examples of the OpenAPI document show it. */
export const SUBSCRIPTION_EXAMPLE = {
  id: 'whk_0123456789abcdef',
  url: 'https://example.com/plantstore/events',
  events: ['plant.created', 'plant.deleted'],
  createdAt: '2026-11-25T09:30:00.000Z',
  status: 'active',
  disabledReason: null,
  disabledAt: null,
  queued: 0,
  failingSince: null,
}

/** A subscription as listed: never its secret. */
export const SubscriptionShape = Type.Object(
  { id, url, events, createdAt: Type.String({ format: 'date-time' }), ...health },
  {
    $id: 'WebhookSubscription',
    title: 'WebhookSubscription',
    additionalProperties: false,
    examples: [SUBSCRIPTION_EXAMPLE],
  },
)
export type SubscriptionShape = Static<typeof SubscriptionShape>

/** A subscription just created: with its signing secret, shown this once. */
export const CreatedSubscription = Type.Object(
  {
    id,
    url,
    events,
    createdAt: Type.String({ format: 'date-time' }),
    ...health,
    secret: Type.String({
      pattern: '^whsec_[A-Za-z0-9+/=]+$',
      description: 'Standard Webhooks signing secret; shown only in this answer',
    }),
  },
  {
    title: 'CreatedWebhookSubscription',
    additionalProperties: false,
    examples: [{ ...SUBSCRIPTION_EXAMPLE, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }],
  },
)

/** Path parameters of DELETE /webhooks/{id} and POST /webhooks/{id}/enable. */
export const SubscriptionParams = Type.Object({ id }, { additionalProperties: false })
