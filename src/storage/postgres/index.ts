import {
  MigrationsPendingError,
  type CreateOutcome,
  type NewToken,
  type OpenOptions,
  type PageRequest,
  type Storage,
  type StoredPlant,
  type TokenRecord,
  type ClaimedDelivery,
  type DeliveryOutcome,
  type NewSubscription,
  type Subscription,
  type AttemptRecord,
  type FailedDelivery,
  type StorageLimits,
  NO_LIMITS,
  QuotaExceededError,
} from '../types.js'
import { createdBody, deletedBody, newEventId } from '../../webhooks/events.js'
import { PostgresWebhooks, queueEvents } from './webhooks.js'
import { StorageUnavailableError } from '../../errors.js'
import { guard } from './errors.js'
import { connect, type Query, type Sql } from './client.js'
import { migrate, pendingMigrations } from './migrations.js'

interface TokenRow {
  id: string
  account_id: bigint
  account_name: string
  secret_hash: Buffer
  scopes: string
  label: string | null
  created_at: Date
  expires_at: Date | null
  revoked_at: Date | null
}

function toToken(row: TokenRow): TokenRecord & { secretHash: Buffer } {
  return {
    id: row.id,
    accountId: Number(row.account_id),
    accountName: row.account_name,
    secretHash: row.secret_hash,
    scopes: row.scopes.split(' ').filter(Boolean),
    label: row.label,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
  }
}

function withoutSecret(token: TokenRecord & { secretHash: Buffer }): TokenRecord {
  const { secretHash: _hidden, ...record } = token
  return record
}

const tokenColumns = (sql: Query) =>
  sql`t.id, t.account_id, a.name AS account_name, t.secret_hash, t.scopes, t.label,
    t.created_at, t.expires_at, t.revoked_at`

async function findTokenBy(
  sql: Query,
  secretHash: Buffer,
): Promise<(TokenRecord & { secretHash: Buffer }) | undefined> {
  const [row] = await sql<TokenRow[]>`SELECT ${tokenColumns(sql)}
    FROM tokens t JOIN accounts a ON a.id = t.account_id WHERE t.secret_hash = ${secretHash}`
  return row === undefined ? undefined : toToken(row)
}

/**
 * Stores a token, creating its account when new, in one statement; `onlyFirst`: only while the store holds no token
 * at all (run it at serializable isolation, where two such inserts racing make one fail with 40001).
 */
async function insertToken(sql: Query, token: NewToken, onlyFirst = false): Promise<TokenRecord | undefined> {
  const when = onlyFirst ? sql`WHERE NOT EXISTS (SELECT 1 FROM tokens)` : sql``
  // DO UPDATE rather than DO NOTHING, so that an account that exists is returned too.
  const [row] = await sql<TokenRow[]>`WITH account AS (
      INSERT INTO accounts (name, created_at) SELECT ${token.accountName}, now() ${when}
      ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id, name),
    token AS (
      INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at)
      SELECT ${token.id}, id, ${token.secretHash}, ${token.scopes.join(' ')}, ${token.label}, now(), ${token.expiresAt}
      FROM account RETURNING *)
    SELECT t.id, t.account_id, a.name AS account_name, t.secret_hash, t.scopes, t.label, t.created_at,
      t.expires_at, t.revoked_at FROM token t JOIN account a ON a.id = t.account_id`
  return row === undefined ? undefined : withoutSecret(toToken(row))
}

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

const SERIALIZATION_FAILURE = '40001'
// Retries of a statement pair that lost a race; contention that outlasts them is answered 503.
const MAX_ATTEMPTS = 10

/** Storage on PostgreSQL (or an engine speaking its protocol) through a pool of the `postgres` client. */
export class PostgresStorage implements Storage {
  readonly #sql: Sql
  readonly #webhooks: PostgresWebhooks
  readonly #limits: StorageLimits
  readonly #url: string
  readonly migrationsApplied: readonly number[]

  private constructor(url: string, sql: Sql, migrationsApplied: number[], limits: StorageLimits) {
    this.#url = url
    this.#sql = sql
    this.#limits = limits
    this.#webhooks = new PostgresWebhooks(sql, limits)
    this.migrationsApplied = migrationsApplied
  }

  /** Connects, then migrates or checks the schema as `options.migrate` says. */
  static async open(url: string, options: OpenOptions): Promise<PostgresStorage> {
    const sql = connect(url, options.poolSize ?? 10)
    try {
      const applied = await guard(async () => {
        if (options.migrate) return migrate(sql)
        const pending = await pendingMigrations(sql)
        if (pending.length > 0) throw new MigrationsPendingError(pending)
        return []
      })
      return new PostgresStorage(url, sql, applied, options.limits ?? NO_LIMITS)
    } catch (err) {
      await sql.end({ timeout: 1 })
      throw err
    }
  }

  async createPlant(accountId: number, plant: StoredPlant): Promise<CreateOutcome> {
    const sql = this.#sql
    const quota = this.#limits.plantsPerAccount
    // The quota is read in the insert itself. Creates racing at the quota each see the count without the others,
    // so together they may pass it by at most their number (the connections writing to this account at once).
    const room = quota === 0 ? sql`true` : sql`${plantCount(sql, accountId)} < ${quota}`
    return guard(async () => {
      // A delete can slip between the two statements; then the id is free again and the insert is retried.
      for (let attempt = 1; ; attempt++) {
        const queue = this.#queue(accountId, 'plant.created', createdBody(plant))
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

  #queue(accountId: number, type: 'plant.created' | 'plant.deleted', body: string) {
    return queueEvents(this.#sql, accountId, type, newEventId(), body, this.#limits.queuedPerSubscription)
  }

  async listPlants(accountId: number, page: PageRequest): Promise<StoredPlant[]> {
    const sql = this.#sql
    const tag = page.tag === undefined ? sql`` : sql`AND tag = ${page.tag}`
    const after = page.after === undefined ? sql`` : sql`AND id > ${page.after}`
    // The page comes back as one JSON text instead of a row per plant: the client's per-row decoding cost more
    // than the query. Ids travel as text, since JSON numbers cannot hold every int64.
    const [row] = await guard(
      () => sql<
        { page: string }[]
      >`SELECT coalesce(json_agg(json_build_array(id::text, name, tag) ORDER BY id), '[]')::text
        AS page FROM (SELECT id, name, tag FROM plants
          WHERE account_id = ${accountId} ${tag} ${after} ORDER BY id LIMIT ${page.limit}) p`,
    )
    const items = JSON.parse(row!.page) as Array<[id: string, name: string, tag: string | null]>
    return items.map(([id, name, tag]) => ({ id: BigInt(id), name, tag }))
  }

  async deletePlant(accountId: number, id: bigint): Promise<boolean> {
    const sql = this.#sql
    const queue = this.#queue(accountId, 'plant.deleted', deletedBody(id))
    const [deleted] = await guard(
      () => sql<{ n: number }[]>`WITH changed AS (DELETE FROM plants WHERE account_id = ${accountId} AND id = ${id}
        RETURNING id), ${countPlants(sql, accountId, -1)}, ${queue} SELECT count(*)::int AS n FROM changed`,
    )
    return deleted!.n === 1
  }

  async findToken(secretHash: Buffer): Promise<(TokenRecord & { secretHash: Buffer }) | undefined> {
    return guard(() => findTokenBy(this.#sql, secretHash))
  }

  async createToken(token: NewToken): Promise<TokenRecord> {
    return (await guard(() => insertToken(this.#sql, token)))!
  }

  async createFirstToken(token: NewToken): Promise<TokenRecord | undefined> {
    // Serializable, so that of two instances seeing an empty store at once one fails with 40001 and its retry then
    // sees the other's token. A connection of its own, made serializable when it opens: the pool's statements stay
    // read committed, and no statement needs a transaction of the client's (see client.ts).
    const once = connect(this.#url, 1, { default_transaction_isolation: 'serializable' })
    try {
      return await guard(async () => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await insertToken(once, token, true)
          } catch (err) {
            // After MAX_ATTEMPTS the 40001 itself is thrown: guard turns it into 503.
            if ((err as { code?: unknown }).code !== SERIALIZATION_FAILURE || attempt >= MAX_ATTEMPTS) throw err
          }
        }
      })
    } finally {
      await once.end({ timeout: 1 })
    }
  }

  async listTokens(accountName?: string): Promise<TokenRecord[]> {
    const sql = this.#sql
    const filter = accountName === undefined ? sql`` : sql`WHERE a.name = ${accountName}`
    const rows = await guard(
      () => sql<TokenRow[]>`SELECT ${tokenColumns(sql)}
        FROM tokens t JOIN accounts a ON a.id = t.account_id ${filter} ORDER BY t.created_at, t.id`,
    )
    return rows.map((row) => withoutSecret(toToken(row)))
  }

  async revokeToken(id: string): Promise<boolean> {
    const sql = this.#sql
    const result = await guard(() => sql`UPDATE tokens SET revoked_at = now() WHERE id = ${id} AND revoked_at IS NULL`)
    return result.count === 1
  }

  async countTokens(): Promise<number> {
    const sql = this.#sql
    const [row] = await guard(() => sql<{ n: bigint }[]>`SELECT count(*) AS n FROM tokens`)
    return Number(row!.n)
  }

  async ping(): Promise<void> {
    const sql = this.#sql
    await guard(() => sql`SELECT 1`)
  }

  async probeWrite(): Promise<void> {
    const sql = this.#sql
    await guard(
      () => sql`INSERT INTO storage_probe (id, checked_at) VALUES (1, now())
        ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`,
    )
  }

  createSubscription(subscription: NewSubscription): Promise<Subscription> {
    return this.#webhooks.createSubscription(subscription)
  }

  listSubscriptions(filter?: { accountId?: number; accountName?: string }): Promise<Subscription[]> {
    return this.#webhooks.listSubscriptions(filter)
  }

  deleteSubscription(id: string, accountId?: number): Promise<boolean> {
    return this.#webhooks.deleteSubscription(id, accountId)
  }

  enableSubscription(id: string, accountId?: number): Promise<Subscription | undefined> {
    return this.#webhooks.enableSubscription(id, accountId)
  }

  claimDeliveries(limit: number, leaseMs: number, perAccount: number): Promise<ClaimedDelivery[]> {
    return this.#webhooks.claimDeliveries(limit, leaseMs, perAccount)
  }

  finishDelivery(
    delivery: Pick<ClaimedDelivery, 'id' | 'lease' | 'subscriptionId' | 'eventId' | 'eventType'>,
    outcome: DeliveryOutcome,
  ): Promise<void> {
    return this.#webhooks.finishDelivery(delivery, outcome)
  }

  settleDisabled(limit: number): Promise<number> {
    return this.#webhooks.settleDisabled(limit)
  }

  purgeFailedDeliveries(before: Date, limit: number): Promise<number> {
    return this.#webhooks.purgeFailedDeliveries(before, limit)
  }

  deliveryHistory(
    subscriptionId: string,
    limit: number,
  ): Promise<{ attempts: AttemptRecord[]; failed: FailedDelivery[] }> {
    return this.#webhooks.deliveryHistory(subscriptionId, limit)
  }

  countPendingDeliveries(): Promise<number> {
    return this.#webhooks.countPendingDeliveries()
  }

  async close(): Promise<void> {
    // Requests have finished when storage closes (the app closes first), so a connection that does not
    // say goodbye within a second is dropped: one that died in an outage otherwise holds shutdown for long.
    await this.#sql.end({ timeout: 1 })
  }
}
