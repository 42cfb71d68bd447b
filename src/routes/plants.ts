import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ApiError } from '../errors.js'
import { LIMIT_DEFAULT, ListQuery } from '../schemas/list-query.js'
import { NewPlant, Plant, PlantItem } from '../schemas/plant.js'
import { PlantParams } from '../schemas/plant-params.js'
import { callerOf } from '../auth/bearer.js'
import type { PlantStore, StoredPlant } from '../storage/types.js'
import { plantCreated, plantDeleted } from '../webhooks/events.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { errorResponses } from './error-responses.js'

function toPlant(plant: StoredPlant): Plant {
  return plant.tag === null ? { name: plant.name } : { name: plant.name, tag: plant.tag }
}

function project(plant: StoredPlant, fields: Set<string>): PlantItem {
  const item: PlantItem = { name: plant.name }
  if (fields.has('id')) item.id = plant.id
  if (fields.has('tag') && plant.tag !== null) item.tag = plant.tag
  return item
}

function nextLink(query: ListQuery, limit: number, lastId: bigint): string {
  const params = new URLSearchParams({ limit: String(limit), cursor: encodeCursor(lastId) })
  if (query.tag !== undefined) params.set('tag', query.tag)
  if (query.fields !== undefined) params.set('fields', query.fields)
  return `</plants?${params.toString()}>; rel="next"`
}

const security = [{ bearerAuth: [] }]

/** POST /plants, GET /plants, DELETE /plants/{id}. */
export const plantRoutes: FastifyPluginAsyncTypebox<{ plants: PlantStore }> = async (app, { plants }) => {
  app.post(
    '/plants',
    {
      config: { scope: 'plants:write' },
      schema: {
        summary: 'Create a plant',
        description:
          'Creates a new plant in the store. Re-sending an identical plant is a safe retry (200); the same id with a different name or tag is 409 (40901). An account holding its quota of plants gets 409 (40902) for a new one.',
        security,
        body: NewPlant,
        response: {
          200: Type.Ref(Plant, {
            description: 'The plant as stored: exactly the Plant shape (the caller knows the id)',
          }),
          ...errorResponses(
            'validation',
            'malformedJson',
            'conflict',
            'quotaExceeded',
            'bodyTooLarge',
            'unsupportedMediaType',
            'unsupportedEncoding',
            'unavailable',
          ),
        },
      },
    },
    async (request) => {
      const { id, name, tag } = request.body
      const plant: StoredPlant = { id, name, tag: tag ?? null }
      const outcome = await plants.create(callerOf(request).accountId, plant, plantCreated)
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
      schema: {
        summary: 'List plants',
        description:
          'Returns the plants of the caller\'s account in ascending id order, at most `limit` of them. When more remain, a `Link: <...>; rel="next"` header gives the next page.',
        security,
        querystring: ListQuery,
        response: {
          200: Type.Array(PlantItem, {
            description: 'Plant response: by default each item is exactly a Plant; `fields` can add the id',
            headers: {
              Link: Type.String({ description: 'RFC 8288 link to the next page, rel="next"; absent on the last page' }),
            },
          }),
          ...errorResponses('validation', 'unavailable'),
        },
      },
    },
    async (request, reply) => {
      const { query } = request
      const limit = query.limit ?? LIMIT_DEFAULT
      const fields = new Set(query.fields?.split(',') ?? ['name', 'tag'])
      if (!fields.has('name')) throw new ApiError('validation', 'querystring.fields: must include name')
      const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor)
      if (query.cursor !== undefined && after === undefined) {
        throw new ApiError('validation', 'querystring.cursor: not a cursor this server issued')
      }
      const page = await plants.list(callerOf(request).accountId, {
        limit: limit + 1,
        after,
        tag: query.tag,
      })
      const items = page.slice(0, limit)
      const last = items.at(-1)
      if (page.length > limit && last !== undefined) reply.header('link', nextLink(query, limit, last.id))
      return items.map((plant) => project(plant, fields))
    },
  )

  app.delete(
    '/plants/:id',
    {
      config: { scope: 'plants:write' },
      schema: {
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
      const deleted = await plants.delete(callerOf(request).accountId, id, plantDeleted)
      if (!deleted) throw new ApiError('plantNotFound', `no plant with id ${id}`)
      return reply.code(204).send(null)
    },
  )
}
