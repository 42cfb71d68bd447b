import { createApi, type ClientOptions } from './api.js'
import { plantsApi, type PlantsApi } from './plants.js'
import { webhooksApi, type WebhooksApi } from './webhooks.js'

export type { ClientOptions } from './api.js'
export { ErrorCode, PlantStoreError, type ErrorCodeValue } from './errors.js'
export type { IdInput } from './int64.js'
export type { CreateOptions, ListOptions, NewPlant, PageOptions, Plant, PlantPage, PlantsApi } from './plants.js'
export type { RetryOptions } from './retry.js'
export type { CreatedSubscription, NewSubscription, Subscription, WebhooksApi } from './webhooks.js'
export type { components, paths } from './generated/openapi.js'

/** A Plant Store API client. */
export interface PlantStoreClient {
  plants: PlantsApi
  webhooks: WebhooksApi
}

/** A client for the service at `baseUrl`, sending `token`. */
export function createClient(options: ClientOptions): PlantStoreClient {
  const api = createApi(options)
  return { plants: plantsApi(api, options.baseUrl), webhooks: webhooksApi(api) }
}
