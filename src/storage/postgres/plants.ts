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
 * Rows each account's plant count is spread over: concurrent creates of one account update different ones (each
 * backend its own, OWN_STRIPE), so they rarely queue on the same row lock (one row would serialise an account's
 * writes at one commit at a time).
 * Migration 8 spreads existing counts evenly over this many stripes: change both together.
 */
export const PLANT_COUNT_STRIPES = 16

const randomStripe = () => Math.floor(Math.random() * PLANT_COUNT_STRIPES)

/**
 * The stripe a first try takes when the caller names none ($2 null): the backend's own, by its process id, so that
 * the pool's connections each keep to a row of their own instead of meeting at random on one (10 creates at once on
 * 16 random stripes: each shares its row with another in 1 - (15/16)^9, 44% of cases, and waits for its commit).
 * Not a guarantee: connections opened at different times can meet on one stripe for as long as they live (their
 * process ids equal mod 16), and then take turns (bench/README.md, issue 29's targets, "The backlog").
 * Kept under the quota $6 when it is below PLANT_COUNT_STRIPES, where only the first $6 stripes have a share.
 */
const OWN_STRIPE = `(pg_backend_pid() % CASE WHEN $6::int BETWEEN 1 AND ${PLANT_COUNT_STRIPES - 1} THEN $6::int
  ELSE ${PLANT_COUNT_STRIPES} END)::smallint`

/**
 * Stripe `stripe`'s share of the quota `quota`: the quota split over the stripes so that each share can be held
 * exactly, stripe by stripe, and the shares add up to the quota. A quota lowered under what some stripes already
 * count lets the others still fill to their new shares: over it by at most the plants held then.
 */
const SHARE = (stripe: string, quota: string) => `(${quota}::int / ${PLANT_COUNT_STRIPES}
  + CASE WHEN ${stripe} < ${quota}::int % ${PLANT_COUNT_STRIPES} THEN 1 ELSE 0 END)`

/**
 * A create: one stripe of the account's count raised ($2, or the backend's own; only under its share unless the
 * quota $6 is 0), the plant inserted ($1, $3, $4, $5) if it was, and its event queued ($7 on). Constant text,
 * prepared once per connection.
 */
const CREATE = `WITH counted AS (
    INSERT INTO plant_counts (account_id, stripe, plants) SELECT $1, coalesce($2::smallint, ${OWN_STRIPE}), 1
      WHERE NOT EXISTS (SELECT 1 FROM plants WHERE account_id = $1 AND id = $3)
    ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + 1
      WHERE $6::int = 0 OR plant_counts.plants < ${SHARE('plant_counts.stripe', '$6')}
    RETURNING account_id),
  changed AS (INSERT INTO plants (account_id, id, name, tag)
    SELECT account_id, $3, $4, $5 FROM counted RETURNING id),
  ${queueEventText('$1', 7)} SELECT count(*)::int AS n FROM changed`

/** After a create that stored nothing: the plant ($1, $2) if there is one, and the stripes with room (quota $3). */
const AFTER_CREATE = `SELECT p.name, p.tag, (SELECT string_agg(s::text, ',')
    FROM generate_series(0, ${PLANT_COUNT_STRIPES - 1}) s LEFT JOIN plant_counts c ON c.account_id = $1 AND c.stripe = s
    WHERE $3::int = 0 OR coalesce(c.plants, 0) < ${SHARE('s', '$3')}) AS open
  FROM (SELECT 1) one LEFT JOIN plants p ON p.account_id = $1 AND p.id = $2`

/**
 * A delete: the plant ($1, $2) removed, one stripe of the account's count lowered if it was ($3, or the backend's
 * own: any stripe may go below its share), its event queued.
 */
const DELETE = `WITH changed AS (DELETE FROM plants WHERE account_id = $1 AND id = $2 RETURNING id),
  recounted AS (INSERT INTO plant_counts (account_id, stripe, plants)
    SELECT $1, coalesce($3::smallint, (pg_backend_pid() % ${PLANT_COUNT_STRIPES})::smallint), -1 FROM changed
    ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + excluded.plants),
  ${queueEventText('$1', 4)} SELECT count(*)::int AS n FROM changed`

const GET = 'SELECT name, tag FROM plants WHERE account_id = $1 AND id = $2'

const pageTexts = new Map<string, string>()

/**
 * A page's statement for the shape of `request` (16 at most: by tag or not, after an id or not, each field or not),
 * with the account ($1), the limit ($2), then the tag and the id to start after, as the request has them. The page
 * comes back as the answer's JSON text, written by concatenation: json_build_object and json_agg put white space
 * between tokens. to_json escapes a string as JSON.stringify does.
 */
function listText(request: PageRequest): string {
  const key = `${request.tag !== undefined}${request.after !== undefined}${request.fields.id}${request.fields.tag}`
  let text = pageTexts.get(key)
  if (text === undefined) {
    const matching = request.tag === undefined ? 'account_id = $1' : 'account_id = $1 AND tag = $3'
    const after = request.after === undefined ? '' : `AND id > $${request.tag === undefined ? 3 : 4}`
    const id = request.fields.id ? `|| ',"id":' || id::text` : ''
    const tag = request.fields.tag ? `|| CASE WHEN tag IS NULL THEN '' ELSE ',"tag":' || to_json(tag)::text END` : ''
    text = `WITH page AS (SELECT id, name, tag FROM plants WHERE ${matching} ${after} ORDER BY id LIMIT $2)
      SELECT '[' || coalesce(string_agg('{"name":' || to_json(name)::text ${id} ${tag} || '}', ',' ORDER BY id), '')
        || ']' AS json, max(id)::text AS last,
        EXISTS (SELECT 1 FROM plants WHERE ${matching} AND id > (SELECT max(id) FROM page)) AS more
      FROM page`
    pageTexts.set(key, text)
  }
  return text
}

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
      let stripe: number | null | undefined = null
      for (let attempt = 1; stripe !== undefined && attempt <= MAX_ATTEMPTS; attempt++) {
        const values = [accountId, stripe, plant.id, plant.name, plant.tag, quota, ...queued]
        try {
          const [inserted] = await retryingDeadlocks(() => sql.unsafe<{ n: number }[]>(CREATE, values, PREPARED))
          if (inserted!.n === 1) return 'created'
        } catch (err) {
          if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION) throw err
        }
        const [existing] = await sql.unsafe<{ name: string | null; tag: string | null; open: string | null }[]>(
          AFTER_CREATE,
          [accountId, plant.id, quota],
          PREPARED,
        )
        if (existing!.name !== null) {
          return existing!.name === plant.name && existing!.tag === plant.tag ? 'identical' : 'conflict'
        }
        const open = (existing!.open ?? '').split(',').filter(Boolean)
        stripe = open.length === 0 ? undefined : Number(open[Math.floor(Math.random() * open.length)])
      }
      if (stripe === undefined) throw new QuotaExceededError('plants', quota)
      throw new StorageUnavailableError(new Error('the plant count kept changing during create'))
    })
  }

  async get(accountId: number, id: bigint): Promise<StoredPlant | undefined> {
    const [found] = await guard(() =>
      this.#sql.unsafe<{ name: string; tag: string | null }[]>(GET, [accountId, id], PREPARED),
    )
    return found && { id, name: found.name, tag: found.tag }
  }

  async list(accountId: number, request: PageRequest): Promise<PlantPage> {
    const values: (number | string | bigint)[] = [accountId, request.limit]
    if (request.tag !== undefined) values.push(request.tag)
    if (request.after !== undefined) values.push(request.after)
    const [row] = await guard(() =>
      this.#sql.unsafe<{ json: string; last: string | null; more: boolean }[]>(listText(request), values, PREPARED),
    )
    return { json: row!.json, lastId: row!.last === null ? undefined : BigInt(row!.last), more: row!.more }
  }

  async delete(accountId: number, id: bigint, event: EventOf<bigint>): Promise<boolean> {
    const sql = this.#sql
    const queued = queueEventValues(event(id), this.#limits.queuedPerSubscription)
    // The backend's own stripe first, then one drawn at random for each retry: a deadlock retried on the same row
    // could meet the same wait.
    let tries = 0
    const values = () => [accountId, id, tries++ === 0 ? null : randomStripe(), ...queued]
    const [deleted] = await guard(() =>
      retryingDeadlocks(() => sql.unsafe<{ n: number }[]>(DELETE, values(), PREPARED)),
    )
    return deleted!.n === 1
  }
}
