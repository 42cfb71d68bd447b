import { bodyOf, emptyOf, keyHeader, type Api } from './api.js'
import type { paths } from './generated/openapi.js'
import { toId, type IdInput } from './int64.js'
import { nextCursor } from './link.js'

type ListItem = paths['/plants']['get']['responses'][200]['content']['application/json'][number]
type Stored = paths['/plants']['post']['responses'][200]['content']['application/json']
type Found = paths['/plants/{id}']['get']['responses'][200]['content']['application/json']

/** A plant with its id, exact. */
export interface Plant {
  id: bigint
  name: string
  tag?: string
}

/** A plant to create: the id is the caller's, a bigint or a safe-integer number. */
export interface NewPlant {
  id: IdInput
  name: string
  tag?: string
}

/** How to send a create. */
export interface CreateOptions {
  /**
   * The Idempotency-Key to send (a new UUID when not given; retries of this call send the same). Give one of your own
   * to make a create safe to repeat across calls, say after a restart of your program: within the service's 24 hours
   * the same key and plant get the first answer again, and another plant with it a 422.
   */
  idempotencyKey?: string
}

/** Which plants to list. */
export interface ListOptions {
  /** Plants per page, 1 to 1000 (the service's default: 100). */
  limit?: number
  /** Only plants with exactly this tag. */
  tag?: string
}

/** One page to read: where to start is the `nextCursor` of the page before. */
export interface PageOptions extends ListOptions {
  cursor?: string
}

/** A page of plants in ascending id order, and the cursor of the next one (undefined on the last). */
export interface PlantPage {
  plants: Plant[]
  nextCursor: string | undefined
}

export interface PlantsApi {
  /**
   * Creates a plant; an identical one already there is a success, a different one a 409. Sent with an
   * Idempotency-Key, so a retry after a lost answer gets the first answer again.
   */
  create(plant: NewPlant, options?: CreateOptions): Promise<Plant>
  /** Every plant of the account, in ascending id order, fetched a page at a time. */
  list(options?: ListOptions): AsyncIterable<Plant>
  /** One page. */
  page(options?: PageOptions): Promise<PlantPage>
  /** One plant; a PlantStoreError with ErrorCode.plantNotFound when the account has none with that id. */
  get(id: IdInput): Promise<Plant>
  /** Deletes a plant; a PlantStoreError with ErrorCode.plantNotFound when the account has none with that id. */
  delete(id: IdInput): Promise<void>
}

function withTag<T extends object>(value: T, tag: string | undefined): T & { tag?: string } {
  return tag === undefined ? value : { ...value, tag }
}

function toPlant(item: ListItem): Plant {
  if (item.id === undefined) throw new TypeError('the service listed a plant without its id')
  return withTag({ id: item.id, name: item.name }, item.tag)
}

export function plantsApi(api: Api, baseUrl: string): PlantsApi {
  async function page(options: PageOptions = {}): Promise<PlantPage> {
    const query = { limit: options.limit, tag: options.tag, cursor: options.cursor, fields: 'id,name,tag' }
    const result = await api.GET('/plants', { params: { query }, parseAs: 'text' })
    const items = bodyOf<ListItem[]>(result)
    const link = result.response.headers.get('link')
    return { plants: items.map(toPlant), nextCursor: nextCursor(link, result.response.url || baseUrl) }
  }

  return {
    async create(plant, options = {}) {
      const id = toId(plant.id)
      const body = withTag({ id, name: plant.name }, plant.tag)
      const params = { header: keyHeader(options.idempotencyKey) }
      const stored = bodyOf<Stored>(await api.POST('/plants', { body, params, parseAs: 'text' }))
      return withTag({ id, name: stored.name }, stored.tag)
    },
    async *list(options = {}) {
      let cursor: string | undefined
      do {
        const next = await page({ ...options, cursor })
        yield* next.plants
        cursor = next.nextCursor
      } while (cursor !== undefined)
    },
    page,
    async get(id) {
      const exact = toId(id)
      const found = bodyOf<Found>(await api.GET('/plants/{id}', { params: { path: { id: exact } }, parseAs: 'text' }))
      return withTag({ id: exact, name: found.name }, found.tag)
    },
    async delete(id) {
      emptyOf(await api.DELETE('/plants/{id}', { params: { path: { id: toId(id) } } }))
    },
  }
}
