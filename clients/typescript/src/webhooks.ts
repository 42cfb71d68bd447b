import { bodyOf, emptyOf, keyHeader, type Api } from './api.js'
import type { CreateOptions } from './plants.js'
import type { components, paths } from './generated/openapi.js'

/** A subscription as listed (never its secret). */
export type Subscription = components['schemas']['WebhookSubscription']
/** What to subscribe: the URL events are POSTed to, and which events (both when absent). */
export type NewSubscription = paths['/webhooks']['post']['requestBody']['content']['application/json']
/** A subscription just made, with its signing secret: shown only this once. */
export type CreatedSubscription = paths['/webhooks']['post']['responses'][201]['content']['application/json']

export interface WebhooksApi {
  /** Subscribes, with an Idempotency-Key: a retry after a lost answer gets the same subscription and secret. */
  create(subscription: NewSubscription, options?: CreateOptions): Promise<CreatedSubscription>
  list(): Promise<Subscription[]>
  delete(id: string): Promise<void>
  /** Turns a disabled subscription back on. */
  enable(id: string): Promise<Subscription>
}

export function webhooksApi(api: Api): WebhooksApi {
  return {
    async create(subscription, options = {}) {
      const params = { header: keyHeader(options.idempotencyKey) }
      return bodyOf(await api.POST('/webhooks', { body: subscription, params, parseAs: 'text' }))
    },
    async list() {
      return bodyOf(await api.GET('/webhooks', { parseAs: 'text' }))
    },
    async delete(id) {
      emptyOf(await api.DELETE('/webhooks/{id}', { params: { path: { id } } }))
    },
    async enable(id) {
      return bodyOf(await api.POST('/webhooks/{id}/enable', { params: { path: { id } }, parseAs: 'text' }))
    },
  }
}
