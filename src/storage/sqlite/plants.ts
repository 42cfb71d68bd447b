import type { Database, Statement } from 'better-sqlite3'
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
import { guard } from './errors.js'
import type { GroupCommit } from './group-commit.js'
import type { SqliteWebhooks } from './webhooks.js'

/** The JSON object of one plant, as PlantPage describes it. */
function itemJson(fields: PageRequest['fields']): string {
  const head = fields.id ? `'name', name, 'id', id` : `'name', name`
  return fields.tag
    ? `CASE WHEN tag IS NULL THEN json_object(${head}) ELSE json_object(${head}, 'tag', tag) END`
    : `json_object(${head})`
}

// LIMIT is written into the SQL, not bound: with a bound LIMIT, SQLite (built with STAT4) re-plans the
// statement on every run, which costs more than reading the 20 rows. One statement per shape and limit.
// json_group_array takes the rows in the order the page yields them (a LIMIT subquery is not flattened into the
// aggregate); its own ORDER BY would sort again and cost four times the read. test/storage/storage.test.ts checks
// the order over ids inserted scrambled.
function pageSql(request: PageRequest): string {
  const matching = ['account_id = :account', request.tag === undefined ? '' : 'tag = :tag']
    .filter(Boolean)
    .join(' AND ')
  const after = request.after === undefined ? '' : ' AND id > :after'
  return `WITH page AS (SELECT id, name, tag FROM plants WHERE ${matching}${after} ORDER BY id LIMIT ${request.limit})
    SELECT json_group_array(${itemJson(request.fields)}), max(id),
      EXISTS (SELECT 1 FROM plants WHERE ${matching} AND id > (SELECT max(id) FROM page)) FROM page`
}

type PageRow = [json: string, lastId: bigint | null, more: bigint]

// Page statements kept prepared; the least recently used is dropped beyond this (the route asks for up to 1000
// rows, in 16 shapes).
const PAGE_STATEMENTS_MAX = 64

/** Plants on SQLite: writes through the group commit, with their events when the account has subscriptions. */
export class SqlitePlants implements PlantStore {
  readonly #db: Database
  readonly #writes: GroupCommit
  readonly #webhooks: SqliteWebhooks
  readonly #quota: number
  readonly #pages = new Map<string, Statement>()
  readonly #insertPlant: Statement
  readonly #getPlant: Statement
  readonly #deletePlant: Statement
  readonly #createWithEvent: (accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>) => CreateOutcome
  readonly #deleteWithEvent: (accountId: number, id: bigint, event: EventOf<bigint>) => boolean

  constructor(db: Database, writes: GroupCommit, webhooks: SqliteWebhooks, limits: StorageLimits) {
    this.#db = db
    this.#writes = writes
    this.#webhooks = webhooks
    this.#quota = limits.plantsPerAccount
    // The quota is checked in the insert itself; the count is kept by triggers on plants (migration 4).
    this.#insertPlant = db.prepare(
      this.#quota === 0
        ? 'INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING'
        : `INSERT INTO plants (account_id, id, name, tag) SELECT :account, :id, :name, :tag
           WHERE coalesce((SELECT plants FROM plant_counts WHERE account_id = :account AND stripe = 0), 0) < ${this.#quota}
           ON CONFLICT DO NOTHING`,
    )
    this.#getPlant = db.prepare('SELECT name, tag FROM plants WHERE account_id = ? AND id = ?')
    this.#deletePlant = db.prepare('DELETE FROM plants WHERE account_id = ? AND id = ?')
    // Inside a group-commit batch these nest as savepoints: the plant change and its event stand or fall together.
    this.#createWithEvent = db.transaction((accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>) => {
      const outcome = this.#insert(accountId, plant)
      if (outcome === 'created') webhooks.queue(accountId, event(plant))
      return outcome
    })
    this.#deleteWithEvent = db.transaction((accountId: number, id: bigint, event: EventOf<bigint>) => {
      const deleted = this.#delete(accountId, id)
      if (deleted) webhooks.queue(accountId, event(id))
      return deleted
    })
  }

  create(accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>): Promise<CreateOutcome> {
    // Without subscriptions a create is one change and needs no savepoint (they cost as much as the insert).
    return this.#writes.run(() =>
      this.#webhooks.hasSubscriptions(accountId)
        ? this.#createWithEvent(accountId, plant, event)
        : this.#insert(accountId, plant),
    )
  }

  #insert(accountId: number, plant: StoredPlant): CreateOutcome {
    const inserted =
      this.#quota > 0
        ? this.#insertPlant.run({ account: accountId, id: plant.id, name: plant.name, tag: plant.tag })
        : this.#insertPlant.run(accountId, plant.id, plant.name, plant.tag)
    if (inserted.changes === 1) return 'created'
    const existing = this.#getPlant.get(accountId, plant.id) as { name: string; tag: string | null } | undefined
    // Writes are serialised: nothing inserted and no such plant can only mean the quota refused it.
    if (existing === undefined) throw new QuotaExceededError('plants', this.#quota)
    return existing.name === plant.name && existing.tag === plant.tag ? 'identical' : 'conflict'
  }

  async get(accountId: number, id: bigint): Promise<StoredPlant | undefined> {
    const found = guard(() => this.#getPlant.get(accountId, id) as { name: string; tag: string | null } | undefined)
    return found && { id, name: found.name, tag: found.tag }
  }

  async list(accountId: number, request: PageRequest): Promise<PlantPage> {
    const statement = this.#pageStatement(request)
    const args: Record<string, unknown> = { account: accountId }
    if (request.tag !== undefined) args.tag = request.tag
    if (request.after !== undefined) args.after = request.after
    const [json, lastId, more] = guard(() => statement.get(args) as PageRow)
    return { json, lastId: lastId ?? undefined, more: more === 1n }
  }

  #pageStatement(request: PageRequest): Statement {
    const { limit, fields } = request
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`page limit ${limit} is not a positive integer`)
    const key = `${request.tag !== undefined}:${request.after !== undefined}:${fields.id}:${fields.tag}:${limit}`
    let statement = this.#pages.get(key)
    if (statement !== undefined) {
      // Most recently used last: Map iteration order is insertion order, so eviction takes the least recent.
      this.#pages.delete(key)
      this.#pages.set(key, statement)
    } else {
      statement = this.#db.prepare(pageSql(request)).safeIntegers(true).raw(true)
      if (this.#pages.size >= PAGE_STATEMENTS_MAX) this.#pages.delete(this.#pages.keys().next().value!)
      this.#pages.set(key, statement)
    }
    return statement
  }

  delete(accountId: number, id: bigint, event: EventOf<bigint>): Promise<boolean> {
    return this.#writes.run(() =>
      this.#webhooks.hasSubscriptions(accountId)
        ? this.#deleteWithEvent(accountId, id, event)
        : this.#delete(accountId, id),
    )
  }

  #delete(accountId: number, id: bigint): boolean {
    return this.#deletePlant.run(accountId, id).changes === 1
  }
}
