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
import type { Sql } from './client.js'
import { guard, retryingDeadlocks } from './errors.js'
import { queueEventText, queueEventValues } from './webhooks.js'

/**
 * Rows each account's plant count is spread over: concurrent creates of one account update a random one each, so
 * they rarely queue on the same row lock (one row would serialise an account's writes at one commit at a time).
 * Migration 8 spreads existing counts evenly over this many stripes: change both together.
 */
export const PLANT_COUNT_STRIPES = 16

const randomStripe = () => Math.floor(Math.random() * PLANT_COUNT_STRIPES)

/**
 * The plants quota split over the stripes, so that each stripe's share can be held exactly: stripe `s` may count
 * up to its share, and the shares add up to the quota. A quota lowered under what some stripes already count lets
 * the others still fill to their new shares: over it by at most the plants held then.
 */
const shareOf = (quota: number, stripe: number) =>
  Math.floor(quota / PLANT_COUNT_STRIPES) + (stripe < quota % PLANT_COUNT_STRIPES ? 1 : 0)

/** A stripe with room for one more plant, given each stripe's count; undefined when every one is at its share. */
function stripeWithRoom(quota: number, counts: Map<number, number>): number | undefined {
  if (quota === 0) return randomStripe()
  const open = []
  for (let stripe = 0; stripe < PLANT_COUNT_STRIPES; stripe++) {
    if ((counts.get(stripe) ?? 0) < shareOf(quota, stripe)) open.push(stripe)
  }
  return open[Math.floor(Math.random() * open.length)]
}

/**
 * A create: one stripe of the account's count raised ($2, only under its share $7 unless the quota $6 is 0), the plant
 * inserted ($1, $3, $4, $5) if it was, and its event queued ($8 on). Constant text, prepared once per connection.
 */
const CREATE = `WITH counted AS (
    INSERT INTO plant_counts (account_id, stripe, plants) SELECT $1, $2, 1
      WHERE NOT EXISTS (SELECT 1 FROM plants WHERE account_id = $1 AND id = $3)
    ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + 1
      WHERE $6::int = 0 OR plant_counts.plants < $7::bigint
    RETURNING account_id),
  changed AS (INSERT INTO plants (account_id, id, name, tag)
    SELECT account_id, $3, $4, $5 FROM counted RETURNING id),
  ${queueEventText('$1', 8)} SELECT count(*)::int AS n FROM changed`

/** A delete: the plant ($1, $2) removed, one stripe ($3) of the account's count lowered if it was, its event queued. */
const DELETE = `WITH changed AS (DELETE FROM plants WHERE account_id = $1 AND id = $2 RETURNING id),
  recounted AS (INSERT INTO plant_counts (account_id, stripe, plants) SELECT $1, $3, -1 FROM changed
    ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + excluded.plants),
  ${queueEventText('$1', 4)} SELECT count(*)::int AS n FROM changed`

// sql.unsafe sends unnamed statements, planned on every call, unless told to prepare them (tagged templates are).
const PREPARED = { prepare: true }

const UNIQUE_VIOLATION = '23505'
// Retries of a create whose stripe filled, or whose plant was deleted, between its statements: each follows a
// stripe filling up (at most PLANT_COUNT_STRIPES until a delete) or a racing delete. Beyond them, 503.
const MAX_ATTEMPTS = 2 * PLANT_COUNT_STRIPES

/** Plants on PostgreSQL: each change one statement, with its count and its event. */
export class PostgresPlants implements PlantStore {
  readonly #sql: Sql
  readonly #limits: StorageLimits

  constructor(sql: Sql, limits: StorageLimits) {
    this.#sql = sql
    this.#limits = limits
  }

  /**
   * The quota holds exactly on any number of instances: a create first raises one stripe of the account's count,
   * only while that stripe is under its share of the quota, and inserts the plant only if it did. ON CONFLICT's
   * WHERE is checked on the stripe as committed, once its lock is had, so creates racing for the last room cannot
   * all take it. The plant's insert has no ON CONFLICT: an equal id committed meanwhile fails the whole statement
   * (23505), its count raise included, and the create reads what is there.
   */
  async create(accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>): Promise<CreateOutcome> {
    const sql = this.#sql
    const quota = this.#limits.plantsPerAccount
    const queued = queueEventValues(event(plant), this.#limits.queuedPerSubscription)
    return guard(async () => {
      let stripe: number | undefined = stripeWithRoom(quota, new Map())
      for (let attempt = 1; stripe !== undefined && attempt <= MAX_ATTEMPTS; attempt++) {
        const share = quota === 0 ? 0 : shareOf(quota, stripe)
        const values = [accountId, stripe, plant.id, plant.name, plant.tag, quota, share, ...queued]
        try {
          const [inserted] = await retryingDeadlocks(() => sql.unsafe<{ n: number }[]>(CREATE, values, PREPARED))
          if (inserted!.n === 1) return 'created'
        } catch (err) {
          if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION) throw err
        }
        const [existing] = await sql<{ name: string | null; tag: string | null; stripes: string | null }[]>`SELECT
          p.name, p.tag, (SELECT string_agg(stripe || ':' || plants, ',') FROM plant_counts
            WHERE account_id = ${accountId}) AS stripes
          FROM (SELECT 1) one LEFT JOIN plants p ON p.account_id = ${accountId} AND p.id = ${plant.id}`
        if (existing!.name !== null) {
          return existing!.name === plant.name && existing!.tag === plant.tag ? 'identical' : 'conflict'
        }
        const counts = (existing!.stripes ?? '').split(',').filter(Boolean)
        stripe = stripeWithRoom(quota, new Map(counts.map((entry) => entry.split(':').map(Number) as [number, number])))
      }
      if (stripe === undefined) throw new QuotaExceededError('plants', quota)
      throw new StorageUnavailableError(new Error('the plant count kept changing during create'))
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
    const queued = queueEventValues(event(id), this.#limits.queuedPerSubscription)
    // A stripe drawn again for each try: a deadlock retried on the same row could meet the same wait.
    const values = () => [accountId, id, randomStripe(), ...queued]
    const [deleted] = await guard(() =>
      retryingDeadlocks(() => sql.unsafe<{ n: number }[]>(DELETE, values(), PREPARED)),
    )
    return deleted!.n === 1
  }
}
