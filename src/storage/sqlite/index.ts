import { existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import Database, { type Statement } from 'better-sqlite3'
import {
  MigrationsPendingError,
  type CreateOutcome,
  type NewToken,
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
import { ensureAccount } from './accounts.js'
import { SqliteWebhooks } from './webhooks.js'
import { guard } from './errors.js'
import { GroupCommit } from './group-commit.js'
import { migrate, pendingMigrations } from './migrations.js'

interface TokenRow {
  id: string
  account_id: number
  account_name: string
  secret_hash: Buffer
  scopes: string
  label: string | null
  created_at: number
  expires_at: number | null
  revoked_at: number | null
}

const TOKEN_COLUMNS = `t.id, t.account_id, a.name AS account_name, t.secret_hash, t.scopes, t.label,
  t.created_at, t.expires_at, t.revoked_at`

function toToken(row: TokenRow): TokenRecord & { secretHash: Buffer } {
  return {
    id: row.id,
    accountId: row.account_id,
    accountName: row.account_name,
    secretHash: row.secret_hash,
    scopes: row.scopes.split(' ').filter(Boolean),
    label: row.label,
    createdAt: new Date(row.created_at),
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at),
    revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
  }
}

// LIMIT is written into the SQL, not bound: with a bound LIMIT, SQLite (built with STAT4) re-plans the
// statement on every run, which costs more than reading the 20 rows. One statement per shape and limit.
function pageSql(tag: boolean, after: boolean, limit: number): string {
  const where = ['account_id = ?', tag ? 'tag = ?' : '', after ? 'id > ?' : ''].filter(Boolean).join(' AND ')
  return `SELECT id, name, tag FROM plants WHERE ${where} ORDER BY id LIMIT ${limit}`
}

type PageRow = [id: bigint, name: string, tag: string | null]

// How long a readiness probe or a webhook claim waits for another process's write lock: neither is worth holding
// the event loop for the whole busy timeout (better-sqlite3 waits synchronously).
const SHORT_BUSY_TIMEOUT_MS = 100

// Page statements kept prepared; the least recently used is dropped beyond this (the route asks for up to 1001
// rows, in 4 shapes).
const PAGE_STATEMENTS_MAX = 64

/**
 * `mkdir -p`, one level at a time. Node's `mkdirSync(dir, { recursive: true })` spins forever at
 * 100% CPU when mkdir of a child says ENOENT although its parent exists (any path under /proc);
 * here that ENOENT is thrown instead.
 */
function makeDirectories(dir: string): void {
  const parent = dirname(dir)
  if (parent !== dir && !existsSync(parent)) makeDirectories(parent)
  try {
    mkdirSync(dir)
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'EEXIST' || !statSync(dir).isDirectory()) throw err
  }
}

/** Opens the SQLite file (creating folders as needed) in WAL mode with full fsync on commit. */
function open(file: string, busyTimeoutMs: number): Database.Database {
  if (file !== ':memory:') makeDirectories(dirname(file))
  const db = new Database(file, { timeout: busyTimeoutMs })
  db.pragma('journal_mode = WAL')
  // FULL: a commit is on disk before the client hears 200, even across power loss.
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  return db
}

/** Migrates, or checks that no migration is pending; returns the versions applied. */
function prepareSchema(db: Database.Database, apply: boolean): number[] {
  if (apply) return migrate(db)
  const pending = pendingMigrations(db)
  if (pending.length > 0) throw new MigrationsPendingError(pending)
  return []
}

/** Storage on an embedded SQLite file through better-sqlite3. */
export class SqliteStorage implements Storage {
  readonly #db: Database.Database
  readonly #pages: Map<string, Statement>
  readonly #insertPlant: Statement
  readonly #plantsQuota: number
  readonly #getPlant: Statement
  readonly #deletePlant: Statement
  readonly #findToken: Statement
  readonly #probe: Statement
  readonly #writes: GroupCommit
  readonly #busyTimeoutMs: number
  readonly #webhooks: SqliteWebhooks
  readonly #createWithEvents: (accountId: number, plant: StoredPlant) => CreateOutcome
  readonly #deleteWithEvents: (accountId: number, id: bigint) => boolean
  readonly migrationsApplied: readonly number[]

  /**
   * `busyTimeoutMs`: how long a write waits for another process's lock before the request gets 503;
   * `migrate`: apply pending migrations (default) or refuse a database whose schema is behind; `limits`: the
   * per-account quotas (none by default).
   */
  constructor(file: string, options: { busyTimeoutMs?: number; migrate?: boolean; limits?: StorageLimits } = {}) {
    this.#busyTimeoutMs = options.busyTimeoutMs ?? 5000
    const db = (this.#db = guard(() => open(file, this.#busyTimeoutMs)))
    try {
      this.migrationsApplied = guard(() => prepareSchema(db, options.migrate ?? true))
    } catch (err) {
      db.close()
      throw err
    }
    this.#pages = new Map()
    const limits = options.limits ?? NO_LIMITS
    // The quota is checked in the insert itself; the count is kept by triggers on plants (migration 4).
    this.#insertPlant = db.prepare(
      limits.plantsPerAccount === 0
        ? 'INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING'
        : `INSERT INTO plants (account_id, id, name, tag) SELECT :account, :id, :name, :tag
           WHERE coalesce((SELECT plants FROM plant_counts WHERE account_id = :account AND stripe = 0), 0) < ${limits.plantsPerAccount}
           ON CONFLICT DO NOTHING`,
    )
    this.#plantsQuota = limits.plantsPerAccount
    this.#getPlant = db.prepare('SELECT name, tag FROM plants WHERE account_id = ? AND id = ?')
    this.#deletePlant = db.prepare('DELETE FROM plants WHERE account_id = ? AND id = ?')
    this.#findToken = db.prepare(
      `SELECT ${TOKEN_COLUMNS} FROM tokens t JOIN accounts a ON a.id = t.account_id WHERE t.secret_hash = ?`,
    )
    this.#probe = db.prepare(
      'INSERT INTO storage_probe (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at',
    )
    this.#writes = new GroupCommit(db)
    this.#webhooks = new SqliteWebhooks(db, this.#writes, limits)
    // Inside a group-commit batch these nest as savepoints: the plant change and its events stand or fall together.
    this.#createWithEvents = db.transaction((accountId: number, plant: StoredPlant) => {
      const outcome = this.#insert(accountId, plant)
      if (outcome === 'created') this.#webhooks.queue(accountId, 'plant.created', newEventId(), createdBody(plant))
      return outcome
    })
    this.#deleteWithEvents = db.transaction((accountId: number, id: bigint) => {
      const deleted = this.#delete(accountId, id)
      if (deleted) this.#webhooks.queue(accountId, 'plant.deleted', newEventId(), deletedBody(id))
      return deleted
    })
  }

  createPlant(accountId: number, plant: StoredPlant): Promise<CreateOutcome> {
    // Without subscriptions a create is one change and needs no savepoint (they cost as much as the insert).
    return this.#writes.run(() =>
      this.#webhooks.hasSubscriptions(accountId)
        ? this.#createWithEvents(accountId, plant)
        : this.#insert(accountId, plant),
    )
  }

  #insert(accountId: number, plant: StoredPlant): CreateOutcome {
    const inserted =
      this.#plantsQuota > 0
        ? this.#insertPlant.run({ account: accountId, id: plant.id, name: plant.name, tag: plant.tag })
        : this.#insertPlant.run(accountId, plant.id, plant.name, plant.tag)
    if (inserted.changes === 1) return 'created'
    const existing = this.#getPlant.get(accountId, plant.id) as { name: string; tag: string | null } | undefined
    // Writes are serialised: nothing inserted and no such plant can only mean the quota refused it.
    if (existing === undefined) throw new QuotaExceededError('plants', this.#plantsQuota)
    return existing.name === plant.name && existing.tag === plant.tag ? 'identical' : 'conflict'
  }

  async listPlants(accountId: number, page: PageRequest): Promise<StoredPlant[]> {
    const statement = this.#pageStatement(page.tag !== undefined, page.after !== undefined, page.limit)
    const args = [accountId, page.tag, page.after].filter((arg) => arg !== undefined)
    // Raw rows: arrays are cheaper to build than objects with column-name keys.
    const rows = guard(() => statement.all(...args) as PageRow[])
    return rows.map(([id, name, tag]) => ({ id, name, tag }))
  }

  #pageStatement(tag: boolean, after: boolean, limit: number): Statement {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`page limit ${limit} is not a positive integer`)
    const key = `${tag}:${after}:${limit}`
    let statement = this.#pages.get(key)
    if (statement !== undefined) {
      // Most recently used last: Map iteration order is insertion order, so eviction takes the least recent.
      this.#pages.delete(key)
      this.#pages.set(key, statement)
    } else {
      statement = this.#db
        .prepare(pageSql(tag, after, limit))
        .safeIntegers(true)
        .raw(true)
      if (this.#pages.size >= PAGE_STATEMENTS_MAX) this.#pages.delete(this.#pages.keys().next().value!)
      this.#pages.set(key, statement)
    }
    return statement
  }

  deletePlant(accountId: number, id: bigint): Promise<boolean> {
    return this.#writes.run(() =>
      this.#webhooks.hasSubscriptions(accountId) ? this.#deleteWithEvents(accountId, id) : this.#delete(accountId, id),
    )
  }

  #delete(accountId: number, id: bigint): boolean {
    return this.#deletePlant.run(accountId, id).changes === 1
  }

  async findToken(secretHash: Buffer): Promise<(TokenRecord & { secretHash: Buffer }) | undefined> {
    const row = guard(() => this.#findToken.get(secretHash) as TokenRow | undefined)
    return row === undefined ? undefined : toToken(row)
  }

  async createToken(token: NewToken): Promise<TokenRecord> {
    guard(() => this.#db.transaction(() => this.#insertToken(token)).immediate())
    return (await this.findToken(token.secretHash))!
  }

  #insertToken(token: NewToken): true {
    const db = this.#db
    const accountId = ensureAccount(db, token.accountName)
    db.prepare(
      `INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      token.id,
      accountId,
      token.secretHash,
      token.scopes.join(' '),
      token.label,
      Date.now(),
      token.expiresAt?.getTime() ?? null,
    )
    return true
  }

  async createFirstToken(token: NewToken): Promise<TokenRecord | undefined> {
    // IMMEDIATE takes the write lock before counting, so two processes cannot both see an empty store.
    const first = this.#db.transaction(() => (this.#countTokens() === 0 ? this.#insertToken(token) : false))
    return guard(() => first.immediate()) ? (await this.findToken(token.secretHash))! : undefined
  }

  async listTokens(accountName?: string): Promise<TokenRecord[]> {
    const filter = accountName === undefined ? '' : 'WHERE a.name = ?'
    const sql = `SELECT ${TOKEN_COLUMNS} FROM tokens t JOIN accounts a ON a.id = t.account_id ${filter}
      ORDER BY t.created_at, t.id`
    const rows = guard(() => this.#db.prepare(sql).all(...(accountName === undefined ? [] : [accountName])))
    return (rows as TokenRow[]).map((row) => {
      const { secretHash: _hidden, ...record } = toToken(row)
      return record
    })
  }

  async revokeToken(id: string): Promise<boolean> {
    const sql = 'UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'
    return guard(() => this.#db.prepare(sql).run(Date.now(), id).changes === 1)
  }

  async countTokens(): Promise<number> {
    return guard(() => this.#countTokens())
  }

  #countTokens(): number {
    return this.#db.prepare('SELECT count(*) FROM tokens').pluck().get() as number
  }

  async ping(): Promise<void> {
    guard(() => this.#db.prepare('SELECT 1').get())
  }

  async probeWrite(): Promise<void> {
    // Its own short commit, outside the group: better-sqlite3 waits for another process's lock synchronously, and
    // a readiness check must not hold the event loop for the whole busy timeout; a lock held longer is the answer.
    this.#briefly(() => guard(() => this.#probe.run(Date.now())))
  }

  /** Runs `fn` waiting at most SHORT_BUSY_TIMEOUT_MS for another process's write lock. */
  #briefly<T>(fn: () => T): T {
    this.#db.pragma(`busy_timeout = ${SHORT_BUSY_TIMEOUT_MS}`)
    try {
      return fn()
    } finally {
      this.#db.pragma(`busy_timeout = ${this.#busyTimeoutMs}`)
    }
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
    return this.#webhooks.claimDeliveries(limit, leaseMs, perAccount, (fn) => this.#briefly(fn))
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
    if (!this.#db.open) return
    this.#writes.flush()
    this.#db.close()
  }
}
