import type postgres from 'postgres'
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
import { connect, endPool, type Sql } from './client.js'
import { copyField, CopyIn } from './copy-in.js'
import { guard } from './errors.js'
import { hostRotation, onEachHost } from './hosts.js'
import { migrate, pendingMigrations } from './migrations.js'
import { PLANT_COUNT_STRIPES } from './plants.js'

/**
 * Tables of the session an import stages its records in before one statement moves them all. Temporary: they go
 * with the connection, so an import that fails or loses its connection leaves nothing behind.
 */
const STAGING = `
  CREATE TEMP TABLE import_accounts (name text NOT NULL, created_at timestamptz NOT NULL);
  CREATE TEMP TABLE import_tokens (id text NOT NULL, account text NOT NULL, secret_hash bytea NOT NULL,
    scopes text NOT NULL, label text, created_at timestamptz NOT NULL, expires_at timestamptz, revoked_at timestamptz,
    created_by text);
  CREATE TEMP TABLE import_plants (account text NOT NULL, id bigint NOT NULL, name text NOT NULL, tag text);
  CREATE TEMP TABLE import_subscriptions (id text NOT NULL, account text NOT NULL, url text NOT NULL,
    secret text NOT NULL, event_types text NOT NULL, created_at timestamptz NOT NULL, state text NOT NULL,
    disabled_reason text, disabled_at timestamptz)`

const COLUMNS: Record<StoreEntry['type'], [table: string, columns: string[]]> = {
  account: ['import_accounts', ['name', 'created_at']],
  token: [
    'import_tokens',
    ['id', 'account', 'secret_hash', 'scopes', 'label', 'created_at', 'expires_at', 'revoked_at', 'created_by'],
  ],
  plant: ['import_plants', ['account', 'id', 'name', 'tag']],
  subscription: [
    'import_subscriptions',
    ['id', 'account', 'url', 'secret', 'event_types', 'created_at', 'state', 'disabled_reason', 'disabled_at'],
  ],
}

const when = (date: Date | null): string => (date === null ? '\\N' : date.toISOString())

/** One record as the fields of its staging table's COPY row. */
function copyRow(entry: StoreEntry): string[] {
  switch (entry.type) {
    case 'account':
      return [copyField(entry.name), when(entry.createdAt)]
    case 'token':
      return [
        copyField(entry.id),
        copyField(entry.account),
        `\\\\x${entry.secretHash.toString('hex')}`,
        copyField(entry.scopes.join(' ')),
        copyField(entry.label),
        when(entry.createdAt),
        when(entry.expiresAt),
        when(entry.revokedAt),
        copyField(entry.createdBy),
      ]
    case 'plant':
      return [copyField(entry.account), entry.id.toString(), copyField(entry.name), copyField(entry.tag)]
    case 'subscription':
      return [
        copyField(entry.id),
        copyField(entry.account),
        copyField(entry.url),
        copyField(entry.secret),
        copyField(entry.eventTypes.join(' ')),
        when(entry.createdAt),
        entry.state,
        copyField(entry.disabledReason),
        when(entry.disabledAt),
      ]
  }
}

/**
 * Moves everything staged into the store in one statement, so all of it commits or none, and only while the store
 * holds no account, token or plant. The accounts' counts of tokens not revoked and of subscriptions, and the plant
 * counts spread over their stripes (as migration 8 does), are written with them, so quotas hold. Each count is
 * one grouped pass over its table joined by name, not a subquery per account (accounts × tokens).
 */
const MOVE = `WITH empty AS (
    SELECT NOT EXISTS (SELECT 1 FROM accounts) AND NOT EXISTS (SELECT 1 FROM tokens)
      AND NOT EXISTS (SELECT 1 FROM plants) AS ok),
  acc AS (
    INSERT INTO accounts (name, created_at, tokens, subscriptions)
    SELECT s.name, s.created_at, coalesce(t.n, 0), coalesce(w.n, 0)
    FROM import_accounts s
    LEFT JOIN (SELECT account, count(*) AS n FROM import_tokens WHERE revoked_at IS NULL GROUP BY account) t
      ON t.account = s.name
    LEFT JOIN (SELECT account, count(*) AS n FROM import_subscriptions GROUP BY account) w ON w.account = s.name
    WHERE (SELECT ok FROM empty)
    RETURNING id, name),
  tok AS (
    INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at, revoked_at, created_by)
    SELECT t.id, acc.id, t.secret_hash, t.scopes, t.label, t.created_at, t.expires_at, t.revoked_at, t.created_by
    FROM import_tokens t JOIN acc ON acc.name = t.account),
  pla AS (
    INSERT INTO plants (account_id, id, name, tag)
    SELECT acc.id, p.id, p.name, p.tag FROM import_plants p JOIN acc ON acc.name = p.account),
  counted AS (
    INSERT INTO plant_counts (account_id, stripe, plants)
    SELECT c.account_id, s.stripe::smallint,
      c.n / ${PLANT_COUNT_STRIPES} + CASE WHEN s.stripe < c.n % ${PLANT_COUNT_STRIPES} THEN 1 ELSE 0 END
    FROM (SELECT acc.id AS account_id, count(*) AS n FROM import_plants p JOIN acc ON acc.name = p.account
      GROUP BY acc.id) c
    CROSS JOIN generate_series(0, ${PLANT_COUNT_STRIPES - 1}) AS s (stripe)),
  sub AS (
    INSERT INTO webhook_subscriptions
      (id, account_id, url, secret, event_types, created_at, state, disabled_reason, disabled_at)
    SELECT w.id, acc.id, w.url, w.secret, w.event_types, w.created_at, w.state, w.disabled_reason, w.disabled_at
    FROM import_subscriptions w JOIN acc ON acc.name = w.account)
  SELECT (SELECT ok FROM empty) AS ok`

interface SubscriptionRow {
  id: string
  account: string
  url: string
  secret: string
  event_types: string
  created_at: Date
  state: 'active' | 'disabled'
  disabled_reason: SubscriptionEntry['disabledReason']
  disabled_at: Date | null
}

/**
 * Export and import on PostgreSQL, on a client of one connection of its own. Neither uses the client's transactions
 * (`sql.begin`, `sql.reserve`; see client.ts): an export runs BEGIN and COMMIT as plain statements on its single
 * connection (never retired for its age: see openTransfer) and checks after each page that the connection never
 * changed (a reconnection would read outside the snapshot); an import stages its records in temporary tables of the session with COPY and moves them with one
 * statement, atomic by itself.
 */
export class PostgresTransfer implements StoreTransfer {
  readonly #sql: Sql
  /** The backend the export's snapshot lives in. */
  #pid: number | undefined

  constructor(sql: Sql) {
    this.#sql = sql
  }

  /** Fails the export once its connection is another than the one that began the snapshot. */
  async #sameSnapshot(): Promise<void> {
    const [row] = await guard(() => this.#sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)
    if (row!.pid !== this.#pid) {
      throw new Error('the connection to PostgreSQL was lost during the export, which may be incomplete: run it again')
    }
  }

  async *read(account?: string): AsyncIterable<StoreEntry> {
    const sql = this.#sql
    await guard(() => sql.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY'))
    const [began] = await guard(() => sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)
    this.#pid = began!.pid
    const filter = account === undefined ? sql`` : sql`AND a.name = ${account}`
    for (let after = 0n; ;) {
      const rows = await guard(
        () => sql<{ id: bigint; name: string; created_at: Date }[]>`SELECT id, name, created_at FROM accounts a
          WHERE id > ${after} ${filter} ORDER BY id LIMIT ${TRANSFER_PAGE}`,
      )
      await this.#sameSnapshot()
      for (const row of rows) yield { type: 'account', name: row.name, createdAt: row.created_at }
      if (rows.length < TRANSFER_PAGE) break
      after = rows.at(-1)!.id
    }
    yield* await this.#tokens(account)
    yield* this.#plants(filter)
    yield* this.#subscriptions(filter)
    await this.#sameSnapshot()
    await guard(() => sql.unsafe('COMMIT'))
  }

  async #tokens(account: string | undefined): Promise<TokenEntry[]> {
    const sql = this.#sql
    const rows = await guard(() =>
      account === undefined
        ? sql.unsafe<TokenRow[]>(tokensRootsFirst(''))
        : sql.unsafe<TokenRow[]>(tokensRootsFirst('AND a.name = $1'), [account]),
    )
    await this.#sameSnapshot()
    return rows.map(toTokenEntry)
  }

  async *#plants(filter: postgres.Fragment): AsyncIterable<PlantEntry> {
    const sql = this.#sql
    for (let afterAccount = 0n, afterId = 0n; ;) {
      const rows = await guard(
        () => sql<{ account_id: bigint; account: string; id: bigint; name: string; tag: string | null }[]>`SELECT
            p.account_id, a.name AS account, p.id, p.name, p.tag FROM plants p JOIN accounts a ON a.id = p.account_id
          WHERE (p.account_id, p.id) > (${afterAccount}::bigint, ${afterId}::bigint) ${filter}
          ORDER BY p.account_id, p.id LIMIT ${TRANSFER_PAGE}`,
      )
      await this.#sameSnapshot()
      for (const row of rows) yield { type: 'plant', account: row.account, id: row.id, name: row.name, tag: row.tag }
      if (rows.length < TRANSFER_PAGE) return
      afterAccount = rows.at(-1)!.account_id
      afterId = rows.at(-1)!.id
    }
  }

  async *#subscriptions(filter: postgres.Fragment): AsyncIterable<SubscriptionEntry> {
    const sql = this.#sql
    for (let after = ''; ;) {
      const rows = await guard(
        () => sql<SubscriptionRow[]>`SELECT s.id, a.name AS account, s.url, s.secret, s.event_types, s.created_at,
            s.state, s.disabled_reason, s.disabled_at
          FROM webhook_subscriptions s JOIN accounts a ON a.id = s.account_id WHERE s.id > ${after} ${filter}
          ORDER BY s.id LIMIT ${TRANSFER_PAGE}`,
      )
      await this.#sameSnapshot()
      for (const row of rows) {
        yield {
          type: 'subscription',
          id: row.id,
          account: row.account,
          url: row.url,
          secret: row.secret,
          eventTypes: row.event_types.split(' '),
          createdAt: row.created_at,
          state: row.state,
          disabledReason: row.disabled_reason,
          disabledAt: row.disabled_at,
        }
      }
      if (rows.length < TRANSFER_PAGE) return
      after = rows.at(-1)!.id
    }
  }

  async write(entries: AsyncIterable<StoreEntry>): Promise<EntryCounts> {
    const sql = this.#sql
    await this.#refuseHeld()
    await guard(() => sql.unsafe(STAGING))
    const counts: EntryCounts = { accounts: 0, tokens: 0, plants: 0, subscriptions: 0 }
    const accounts = new Set<string>()
    let copy: { type: StoreEntry['type']; into: CopyIn } | undefined
    try {
      for await (const entry of entries) {
        if (entry.type !== copy?.type) {
          await copy?.into.end()
          const [table, columns] = COLUMNS[entry.type]
          copy = { type: entry.type, into: await guard(() => CopyIn.start(sql, table, columns)) }
        }
        if (entry.type === 'account') accounts.add(entry.name)
        else if (!accounts.has(entry.account)) {
          throw new Error(`a record of account ${JSON.stringify(entry.account)}, which no account record named`)
        }
        await copy.into.row(copyRow(entry))
        counts[`${entry.type}s`]++
      }
      await copy?.into.end()
    } catch (err) {
      copy?.into.abort(err as Error)
      throw err
    }
    // Temporary tables are never analyzed by autovacuum: without statistics the planner guesses their sizes.
    await guard(() => sql.unsafe('ANALYZE import_accounts, import_tokens, import_plants, import_subscriptions'))
    const [moved] = await guard(() => sql.unsafe<{ ok: boolean }[]>(MOVE))
    if (!moved!.ok) throw new StoreNotEmptyError()
    return counts
  }

  async #refuseHeld(): Promise<void> {
    const sql = this.#sql
    const [row] = await guard(
      () => sql<{ held: boolean }[]>`SELECT EXISTS (SELECT 1 FROM accounts) OR EXISTS (SELECT 1 FROM tokens)
        OR EXISTS (SELECT 1 FROM plants) AS held`,
    )
    if (row!.held) throw new StoreNotEmptyError()
  }

  async close(): Promise<void> {
    await endPool(this.#sql)
  }
}

/**
 * Opens PostgreSQL for export or import on one connection, migrating it or checking it as `options` say, on the
 * first host of a multi-host URL that accepts it. The connection has no maximum lifetime: the client would otherwise
 * replace it after 30 to 60 minutes, and a long export would lose its snapshot.
 */
export async function openTransfer(url: string, options: Pick<OpenOptions, 'migrate'>): Promise<StoreTransfer> {
  const sql = connect(url, 1, {}, { max_lifetime: null })
  try {
    await onEachHost(hostRotation(url), () =>
      migrateOrCheck(options.migrate, { apply: () => migrate(sql), pending: () => pendingMigrations(sql) }),
    )
  } catch (err) {
    await sql.end({ timeout: 1 })
    throw err
  }
  return new PostgresTransfer(sql)
}
