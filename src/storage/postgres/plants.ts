import { StorageUnavailableError } from '../types.js'
import {
  QuotaExceededError,
  type CreateOutcome,
  type EventOf,
  type PageRequest,
  type PlantPage,
  type PlantStore,
  type StorageLimits,
  type StoredPlant,
} from '../types.js'
import type { Query, Sql } from './client.js'
import { guard } from './errors.js'
import { queueEvent } from './webhooks.js'

/**
 * Rows each account's plant count is spread over: concurrent creates of one account update a random one each, so
 * they rarely queue on the same row lock (one row would serialise an account's writes at one commit at a time).
 */
const PLANT_COUNT_STRIPES = 16

const randomStripe = () => Math.floor(Math.random() * PLANT_COUNT_STRIPES)

/** The number of plants the account holds: the sum of its stripes. */
const plantCount = (sql: Query, accountId: number) =>
  sql`(SELECT coalesce(sum(plants), 0) FROM plant_counts WHERE account_id = ${accountId})`

/** A CTE adding `delta` to one stripe of the account's plant count for each row of `changed`. */
const countPlants = (sql: Query, accountId: number, delta: 1 | -1) =>
  sql`recounted AS (INSERT INTO plant_counts (account_id, stripe, plants)
    SELECT ${accountId}, ${randomStripe()}, ${delta}::bigint FROM changed
    ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + excluded.plants)`

// Retries of a create that lost a race with a delete; contention that outlasts them is answered 503.
const MAX_ATTEMPTS = 10

/** Plants on PostgreSQL: each change one statement, with its count and its event. */
export class PostgresPlants implements PlantStore {
  readonly #sql: Sql
  readonly #limits: StorageLimits

  constructor(sql: Sql, limits: StorageLimits) {
    this.#sql = sql
    this.#limits = limits
  }

  async create(accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>): Promise<CreateOutcome> {
    const sql = this.#sql
    const quota = this.#limits.plantsPerAccount
    // The quota is read in the insert itself. Creates racing at the quota each see the count without the others,
    // so together they may pass it by at most their number (the connections writing to this account at once).
    const room = quota === 0 ? sql`true` : sql`${plantCount(sql, accountId)} < ${quota}`
    const queue = queueEvent(sql, accountId, event(plant), this.#limits.queuedPerSubscription)
    return guard(async () => {
      // A delete can slip between the two statements; then the id is free again and the insert is retried.
      for (let attempt = 1; ; attempt++) {
        const [inserted] = await sql<{ n: number }[]>`WITH changed AS (INSERT INTO plants (account_id, id, name, tag)
          SELECT ${accountId}, ${plant.id}, ${plant.name}, ${plant.tag} WHERE ${room}
          ON CONFLICT DO NOTHING RETURNING id),
          ${countPlants(sql, accountId, 1)}, ${queue} SELECT count(*)::int AS n FROM changed`
        if (inserted!.n === 1) return 'created'
        const [existing] = await sql<{ name: string | null; tag: string | null; used: bigint }[]>`SELECT p.name, p.tag,
          ${plantCount(sql, accountId)}::bigint AS used
          FROM (SELECT 1) one LEFT JOIN plants p ON p.account_id = ${accountId} AND p.id = ${plant.id}`
        if (existing!.name === null && quota > 0 && existing!.used >= BigInt(quota)) {
          throw new QuotaExceededError('plants', quota)
        }
        if (existing!.name === null && attempt < MAX_ATTEMPTS) continue
        if (existing!.name === null) throw new StorageUnavailableError(new Error('plant kept vanishing during create'))
        return existing!.name === plant.name && existing!.tag === plant.tag ? 'identical' : 'conflict'
      }
    })
  }

  async list(accountId: number, request: PageRequest): Promise<PlantPage> {
    const sql = this.#sql
    const matching =
      request.tag === undefined
        ? sql`account_id = ${accountId}`
        : sql`account_id = ${accountId} AND tag = ${request.tag}`
    const after = request.after === undefined ? sql`` : sql`AND id > ${request.after}`
    // The page comes back as the answer's JSON text, written by concatenation: json_build_object and json_agg
    // put white space between tokens. to_json escapes a string as JSON.stringify does.
    const id = request.fields.id ? sql`|| ',"id":' || id::text` : sql``
    const tag = request.fields.tag
      ? sql`|| CASE WHEN tag IS NULL THEN '' ELSE ',"tag":' || to_json(tag)::text END`
      : sql``
    const [row] = await guard(
      () => sql<{ json: string; last: string | null; more: boolean }[]>`WITH page AS (SELECT id, name, tag FROM plants
          WHERE ${matching} ${after} ORDER BY id LIMIT ${request.limit})
        SELECT '[' || coalesce(string_agg('{"name":' || to_json(name)::text ${id} ${tag} || '}', ',' ORDER BY id), '') || ']'
          AS json, max(id)::text AS last,
          EXISTS (SELECT 1 FROM plants WHERE ${matching} AND id > (SELECT max(id) FROM page)) AS more
        FROM page`,
    )
    return { json: row!.json, lastId: row!.last === null ? undefined : BigInt(row!.last), more: row!.more }
  }

  async delete(accountId: number, id: bigint, event: EventOf<bigint>): Promise<boolean> {
    const sql = this.#sql
    const queue = queueEvent(sql, accountId, event(id), this.#limits.queuedPerSubscription)
    const [deleted] = await guard(
      () => sql<{ n: number }[]>`WITH changed AS (DELETE FROM plants WHERE account_id = ${accountId} AND id = ${id}
        RETURNING id), ${countPlants(sql, accountId, -1)}, ${queue} SELECT count(*)::int AS n FROM changed`,
    )
    return deleted!.n === 1
  }
}
