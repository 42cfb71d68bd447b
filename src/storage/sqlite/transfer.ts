import type { Database, Statement } from 'better-sqlite3'
import { migrateOrCheck } from '../schema.js'
import { toTokenEntry, type TokenRow } from '../rows.js'
import { tokensRootsFirst, TRANSFER_PAGE } from '../transfer-rules.js'
import {
  StoreNotEmptyError,
  type EntryCounts,
  type OpenOptions,
  type PlantEntry,
  type StoreEntry,
  type StoreTransfer,
  type SubscriptionEntry,
  type TokenEntry,
} from '../types.js'
import { BUSY_TIMEOUT_MS, openDatabase } from './database.js'
import { guard } from './errors.js'
import { migrate, pendingMigrations } from './migrations.js'

const time = (ms: number | null): Date | null => (ms === null ? null : new Date(ms))

interface AccountRow {
  id: number
  name: string
  created_at: number
}

type PlantRow = [accountId: bigint, account: string, id: bigint, name: string, tag: string | null]

interface SubscriptionRow {
  id: string
  account: string
  url: string
  secret: string
  event_types: string
  created_at: number
  state: 'active' | 'disabled'
  disabled_reason: SubscriptionEntry['disabledReason']
  disabled_at: number | null
}

/** The statements of an import: one per kind of record, an account's id found by its name. */
class Writer {
  readonly counts: EntryCounts = { accounts: 0, tokens: 0, plants: 0, subscriptions: 0 }
  readonly #accounts = new Map<string, number>()
  readonly #insertAccount: Statement
  readonly #insertToken: Statement
  readonly #insertPlant: Statement
  readonly #insertSubscription: Statement

  constructor(db: Database) {
    this.#insertAccount = db.prepare('INSERT INTO accounts (name, created_at) VALUES (?, ?) RETURNING id').pluck()
    this.#insertToken = db.prepare(
      `INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at, revoked_at, created_by)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    // The trigger of migration 4 counts each plant into plant_counts, as a create would.
    this.#insertPlant = db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?)')
    this.#insertSubscription = db.prepare(
      `INSERT INTO webhook_subscriptions
         (id, account_id, url, secret, event_types, created_at, state, disabled_reason, disabled_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
  }

  #accountId(name: string): number {
    const id = this.#accounts.get(name)
    if (id === undefined) throw new Error(`a record of account ${JSON.stringify(name)}, which no account record named`)
    return id
  }

  write(entry: StoreEntry): void {
    switch (entry.type) {
      case 'account':
        this.#accounts.set(entry.name, this.#insertAccount.get(entry.name, entry.createdAt.getTime()) as number)
        this.counts.accounts++
        return
      case 'token':
        this.#token(entry)
        this.counts.tokens++
        return
      case 'plant':
        this.#plant(entry)
        this.counts.plants++
        return
      case 'subscription':
        this.#subscription(entry)
        this.counts.subscriptions++
    }
  }

  #token(t: TokenEntry): void {
    this.#insertToken.run(
      t.id,
      this.#accountId(t.account),
      t.secretHash,
      t.scopes.join(' '),
      t.label,
      t.createdAt.getTime(),
      t.expiresAt?.getTime() ?? null,
      t.revokedAt?.getTime() ?? null,
      t.createdBy,
    )
  }

  #plant(p: PlantEntry): void {
    this.#insertPlant.run(this.#accountId(p.account), p.id, p.name, p.tag)
  }

  #subscription(s: SubscriptionEntry): void {
    this.#insertSubscription.run(
      s.id,
      this.#accountId(s.account),
      s.url,
      s.secret,
      s.eventTypes.join(' '),
      s.createdAt.getTime(),
      s.state,
      s.disabledReason,
      s.disabledAt?.getTime() ?? null,
    )
  }
}

/** Export and import on a SQLite file, on a connection of its own. */
export class SqliteTransfer implements StoreTransfer {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  /**
   * One read transaction (WAL: a snapshot that writers committing meanwhile do not change) over keyset pages, so
   * that the export is consistent and its memory bounded.
   */
  async *read(account?: string): AsyncIterable<StoreEntry> {
    const db = this.#db
    guard(() => db.exec('BEGIN DEFERRED'))
    try {
      const filter = account === undefined ? '' : 'AND a.name = @account'
      const params = account === undefined ? {} : { account }
      const accounts = db.prepare(
        `SELECT id, name, created_at FROM accounts a WHERE id > @after ${filter} ORDER BY id LIMIT ${TRANSFER_PAGE}`,
      )
      for (let after = 0; ;) {
        const rows = guard(() => accounts.all({ ...params, after }) as AccountRow[])
        for (const row of rows) yield { type: 'account', name: row.name, createdAt: new Date(row.created_at) }
        if (rows.length < TRANSFER_PAGE) break
        after = rows.at(-1)!.id
      }
      yield* this.#tokens(filter, params)
      yield* this.#plants(filter, params)
      yield* this.#subscriptions(filter, params)
    } finally {
      if (db.inTransaction) db.exec('COMMIT')
    }
  }

  *#tokens(filter: string, params: object): Iterable<TokenEntry> {
    const rows = guard(() => this.#db.prepare(tokensRootsFirst(filter)).all(params) as TokenRow[])
    for (const row of rows) yield toTokenEntry(row)
  }

  *#plants(filter: string, params: object): Iterable<PlantEntry> {
    const page = this.#db
      .prepare(
        `SELECT p.account_id, a.name, p.id, p.name, p.tag FROM plants p JOIN accounts a ON a.id = p.account_id
         WHERE (p.account_id, p.id) > (@afterAccount, @afterId) ${filter}
         ORDER BY p.account_id, p.id LIMIT ${TRANSFER_PAGE}`,
      )
      .raw(true)
      .safeIntegers(true)
    for (let afterAccount = 0n, afterId = 0n; ;) {
      const rows = guard(() => page.all({ ...params, afterAccount, afterId }) as PlantRow[])
      for (const [, account, id, name, tag] of rows) yield { type: 'plant', account, id, name, tag }
      if (rows.length < TRANSFER_PAGE) return
      ;[afterAccount, , afterId] = rows.at(-1)!
    }
  }

  *#subscriptions(filter: string, params: object): Iterable<SubscriptionEntry> {
    const page = this.#db.prepare(
      `SELECT s.id, a.name AS account, s.url, s.secret, s.event_types, s.created_at, s.state, s.disabled_reason,
         s.disabled_at
       FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id WHERE s.id > @after ${filter}
       ORDER BY s.id LIMIT ${TRANSFER_PAGE}`,
    )
    for (let after = ''; ;) {
      const rows = guard(() => page.all({ ...params, after }) as SubscriptionRow[])
      for (const row of rows) {
        yield {
          type: 'subscription',
          id: row.id,
          account: row.account,
          url: row.url,
          secret: row.secret,
          eventTypes: row.event_types.split(' '),
          createdAt: new Date(row.created_at),
          state: row.state,
          disabledReason: row.disabled_reason,
          disabledAt: time(row.disabled_at),
        }
      }
      if (rows.length < TRANSFER_PAGE) return
      after = rows.at(-1)!.id
    }
  }

  /** One IMMEDIATE transaction around the whole stream: rolled back, nothing written, whatever fails. */
  async write(entries: AsyncIterable<StoreEntry>): Promise<EntryCounts> {
    const db = this.#db
    guard(() => db.exec('BEGIN IMMEDIATE'))
    try {
      const held = db
        .prepare(
          `SELECT EXISTS (SELECT 1 FROM accounts) OR EXISTS (SELECT 1 FROM tokens) OR EXISTS (SELECT 1 FROM plants)`,
        )
        .pluck()
      if (held.get() === 1) throw new StoreNotEmptyError()
      const writer = new Writer(db)
      for await (const entry of entries) guard(() => writer.write(entry))
      guard(() => db.exec('COMMIT'))
      return writer.counts
    } finally {
      if (db.inTransaction) db.exec('ROLLBACK')
    }
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close()
  }
}

/** Opens a SQLite file for export or import, migrating it or checking that it is current as `options` say. */
export async function openTransfer(file: string, options: Pick<OpenOptions, 'migrate'>): Promise<StoreTransfer> {
  const db = guard(() => openDatabase(file, BUSY_TIMEOUT_MS))
  try {
    await migrateOrCheck(options.migrate, {
      apply: () => guard(() => migrate(db)),
      pending: () => guard(() => pendingMigrations(db)),
    })
  } catch (err) {
    db.close()
    throw err
  }
  return new SqliteTransfer(db)
}
