import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { ApiError } from '../errors.js'
import { LIMIT_DEFAULT, ListQuery } from '../schemas/list-query.js'
import { NewPlant, Plant, PlantItem } from '../schemas/plant.js'
import { GetPlantParams, PlantParams } from '../schemas/plant-params.js'
import { callerOf } from '../auth/caller.js'
import type { IdempotencyHooks } from '../plugins/idempotency.js'
import { pageBudgetHook } from '../plugins/page-budget-hook.js'
import type { PageBudget, PageBudgetBound } from '../plugins/page-budget.js'
import { IdempotencyHeaders, REPLAYED_HEADERS } from '../schemas/idempotency-key.js'
import type { EventOf, PlantStore, StoredPlant } from '../storage/index.js'
import { plantCreated, plantDeleted } from '../webhooks/events.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { creationErrorResponses, errorResponses, withExamples } from './error-responses.js'
import { SECURITY as security } from './security.js'

function toPlant(plant: StoredPlant): Plant {
  return plant.tag === null ? { name: plant.name } : { name: plant.name, tag: plant.tag }
}

// What URLSearchParams writes (application/x-www-form-urlencoded), without building one per page: it cost more than
// the rest of the Link header.
const formEncode = (value: string) =>
  encodeURIComponent(value)
    .replace(/%20/g, '+')
    .replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

function nextLink(query: ListQuery, limit: number, lastId: bigint): string {
  let params = `limit=${limit}&cursor=${encodeCursor(lastId)}`
  if (query.tag !== undefined) params += `&tag=${formEncode(query.tag)}`
  if (query.fields !== undefined) params += `&fields=${formEncode(query.fields)}`
  return `</plants?${params}>; rel="next"`
}

/**
 * Sends text that is already the answer's JSON, shaped as the response schema says (test/storage/storage.test.ts
 * holds the backends to it): with a JSON content type, Fastify sends a string as it is, unserialised.
 */
function sendJsonText(reply: FastifyReply, json: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json)
}

const tags = ['plants']

const LIST_EXAMPLES = {
  default: {
    summary: 'Each item exactly a Plant',
    value: [{ name: 'Monstera', tag: 'tropical' }, { name: 'Fern' }],
  },
  withIds: {
    summary: 'With fields=id,name,tag',
    value: [
      { id: 1, name: 'Monstera', tag: 'tropical' },
      { id: 2, name: 'Fern' },
    ],
  },
}

/** What the plant routes need: the store, and the budget of rows of pages in progress that GET /plants holds. */
export interface PlantRoutesOptions {
  plants: PlantStore
  pageBudget: PageBudget
  /** Told of every page the budget refuses. */
  onPageRefused?: (bound: PageBudgetBound) => void
  /** Claims, keeps and replays the Idempotency-Key of POST /plants. */
  idempotency: IdempotencyHooks
  /** The `traceparent` of the request being served, when traced: its webhook events carry it. */
  traceparent?: () => string | undefined
}

/** POST /plants, GET /plants, GET /plants/{id}, DELETE /plants/{id}. */
export const plantRoutes: FastifyPluginAsyncTypebox<PlantRoutesOptions> = async (
  app,
  { plants, pageBudget, onPageRefused, idempotency, traceparent },
) => {
  // The events of a traced request carry its trace, for their deliveries to continue it.
  const traced = <T>(event: EventOf<T>): EventOf<T> =>
    traceparent === undefined ? event : (subject) => ({ ...event(subject), traceparent: traceparent() })
  const created = traced(plantCreated)
  const deleted = traced(plantDeleted)
  // A page weighs its limit: the rows it may hold, known before it is made.
  const holdPage = pageBudgetHook(
    pageBudget,
    (request) => (request.query as ListQuery).limit ?? LIMIT_DEFAULT,
    onPageRefused,
  )
  app.post(
    '/plants',
    {
      config: { scope: 'plants:write' },
      // Route-level, so after validation and the app's preHandlers: only a valid request claims its key.
      preHandler: idempotency.preHandler,
      onSend: idempotency.onSend,
      schema: {
        operationId: 'createPlant',
        tags,
        summary: 'Create a plant',
        description:
          'Creates a new plant in the store. Re-sending an identical plant is a safe retry (200); the same id with a different name or tag is 409 (40901). An account holding its quota of plants gets 409 (40902) for a new one. With an `Idempotency-Key`, a retry gets the first answer again, whatever happened in between.',
        security,
        headers: IdempotencyHeaders,
        body: NewPlant,
        response: {
          200: withExamples(
            Type.Ref(Plant),
            { created: { summary: 'The plant created', value: { name: 'Monstera', tag: 'tropical' } } },
            {
              description: 'The plant as stored: exactly the Plant shape (the caller knows the id)',
              headers: REPLAYED_HEADERS,
            },
          ),
          ...creationErrorResponses('conflict', 'quotaExceeded', 'idempotencyKeyInUse', 'idempotencyKeyReused'),
        },
      },
    },
    async (request) => {
      const { id, name, tag } = request.body
      const plant: StoredPlant = { id, name, tag: tag ?? null }
      const outcome = await plants.create(callerOf(request).accountId, plant, created)
      if (outcome === 'conflict') {
        throw new ApiError('conflict', `a plant with id ${id} already exists with a different name or tag`)
      }
      return toPlant(plant)
    },
  )

  app.get(
    '/plants',
    {
      config: { scope: 'plants:read' },
      // Route-level: after the app's preHandlers (the pipelining limit's turn), right before the handler.
      preHandler: holdPage,
      schema: {
        operationId: 'listPlants',
        tags,
        summary: 'List plants',
        description:
          'Returns the plants of the caller\'s account in ascending id order, at most `limit` of them. When more remain, a `Link: <...>; rel="next"` header gives the next page. Each page counts as `limit` rows while it is made and sent: an account with too many rows of pages in progress at once (clients reading them slowly) gets 429 (42904), an instance with too many over all accounts 503 (50304), both with `Retry-After`. While the instance is busy, an account whose pages took more than its share of its time in the last second (1/N, N the accounts asking for pages) waits for it, up to 1 s, then gets 429 (42905) with `Retry-After`.',
        security,
        querystring: ListQuery,
        response: {
          200: Type.Array(PlantItem, {
            description: 'Plant response: by default each item is exactly a Plant; `fields` can add the id',
            headers: {
              Link: Type.String({ description: 'RFC 8288 link to the next page, rel="next"; absent on the last page' }),
            },
            'x-examples': LIST_EXAMPLES,
          }),
          ...errorResponses('validation', 'tooManyPageRows', 'tooMuchPageTime', 'serverPagesBusy', 'unavailable'),
        },
      },
    },
    async (request, reply) => {
      const { query } = request
      const limit = query.limit ?? LIMIT_DEFAULT
      const fields = query.fields?.split(',') ?? ['name', 'tag']
      if (!fields.includes('name')) throw new ApiError('validation', 'querystring.fields: must include name')
      const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor)
      if (query.cursor !== undefined && after === undefined) {
        throw new ApiError('validation', 'querystring.cursor: not a cursor this server issued')
      }
      const page = await plants.list(callerOf(request).accountId, {
        limit,
        after,
        tag: query.tag,
        fields: { id: fields.includes('id'), tag: fields.includes('tag') },
      })
      if (page.more && page.lastId !== undefined) reply.header('link', nextLink(query, limit, page.lastId))
      return sendJsonText(reply, page.json)
    },
  )

  app.get(
    '/plants/:id',
    {
      config: { scope: 'plants:read' },
      schema: {
        operationId: 'getPlant',
        tags,
        summary: 'Get a plant',
        description:
          "Returns a single plant based on the id supplied. 404 when the caller's account has no such plant.",
        security,
        params: GetPlantParams,
        response: {
          200: withExamples(
            Type.Ref(Plant),
            { found: { summary: 'The plant', value: { name: 'Monstera', tag: 'tropical' } } },
            { description: 'The plant: exactly the Plant shape (the caller knows the id)' },
          ),
          ...errorResponses('validation', 'plantNotFound', 'unavailable'),
        },
      },
    },
    async (request) => {
      const { id } = request.params
      const plant = await plants.get(callerOf(request).accountId, id)
      if (plant === undefined) throw new ApiError('plantNotFound', `no plant with id ${id}`)
      return toPlant(plant)
    },
  )

  app.delete(
    '/plants/:id',
    {
      config: { scope: 'plants:write' },
      schema: {
        operationId: 'deletePlant',
        tags,
        summary: 'Delete a plant',
        description:
          "Deletes a single plant based on the id supplied. 404 when the caller's account has no such plant.",
        security,
        params: PlantParams,
        response: {
          204: Type.Null({ description: 'Plant deleted' }),
          ...errorResponses('validation', 'plantNotFound', 'unavailable'),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params
      const removed = await plants.delete(callerOf(request).accountId, id, deleted)
      if (!removed) throw new ApiError('plantNotFound', `no plant with id ${id}`)
      return reply.code(204).send(null)
    },
  )
}
