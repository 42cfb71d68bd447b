import type { Database, Statement } from 'better-sqlite3'
import { TOKEN_COLUMNS, toToken, withoutSecret, type TokenRow } from '../rows.js'
import {
  LINEAGE_DEPTH,
  MakerEndedError,
  QuotaExceededError,
  type NewToken,
  type StoredToken,
  type TokenRecord,
  type TokenStore,
} from '../types.js'
import { ensureAccount } from './accounts.js'
import { guard } from './errors.js'

/**
 * The token of secret hash `@hash` with its lineage folded in, as TokenStore.find describes; `@now` is the time of
 * the lookup, the revocation of a token whose lineage is broken (a maker deleted, or beyond LINEAGE_DEPTH). Here,
 * where writes take turns, revoke and remove mark every descendant and no token is made by a maker already ended, so
 * the marks alone would do; the lookup checks the lineage all the same, as PostgreSQL's must (see there), so that
 * both backends answer from one rule whatever the marks say. Each step up is a primary key lookup, and a token made
 * otherwise has no maker, so its lookup costs one step more than before.
 */
const FIND_WITH_LINEAGE = `WITH RECURSIVE lineage (created_by, expires_at, revoked_at, depth) AS (
    SELECT created_by, expires_at, revoked_at, 0 FROM tokens WHERE secret_hash = @hash
    UNION ALL
    SELECT m.created_by, m.expires_at, m.revoked_at, l.depth + 1
      FROM lineage l JOIN tokens m ON m.id = l.created_by WHERE l.depth < ${LINEAGE_DEPTH}),
  folded AS (
    SELECT min(expires_at) AS expires_at, min(revoked_at) AS revoked_at,
      (SELECT created_by FROM lineage ORDER BY depth DESC LIMIT 1) IS NOT NULL AS broken
    FROM lineage)
  SELECT t.id, t.account_id, a.name AS account_name, t.secret_hash, t.scopes, t.label, t.created_at, t.created_by,
    f.expires_at, CASE WHEN f.broken THEN coalesce(f.revoked_at, @now) ELSE f.revoked_at END AS revoked_at
  FROM tokens t JOIN accounts a ON a.id = t.account_id CROSS JOIN folded f WHERE t.secret_hash = @hash`

/** Marks revoked, at `@now`, every token that token `@id` made, transitively. */
const REVOKE_MADE = `WITH RECURSIVE made (id, depth) AS (
    SELECT id, 1 FROM tokens WHERE created_by = @id
    UNION ALL
    SELECT t.id, m.depth + 1 FROM made m JOIN tokens t ON t.created_by = m.id WHERE m.depth < ${LINEAGE_DEPTH})
  UPDATE tokens SET revoked_at = @now WHERE revoked_at IS NULL AND id IN (SELECT id FROM made)`

/** API tokens on SQLite. */
export class SqliteTokens implements TokenStore {
  readonly #db: Database
  readonly #find: Statement
  readonly #count: Statement

  constructor(db: Database) {
    this.#db = db
    this.#find = db.prepare(FIND_WITH_LINEAGE)
    this.#count = db.prepare('SELECT count(*) FROM tokens').pluck()
  }

  async find(secretHash: Buffer): Promise<StoredToken | undefined> {
    const row = guard(() => this.#find.get({ hash: secretHash, now: Date.now() }) as TokenRow | undefined)
    return row === undefined ? undefined : toToken(row)
  }

  async create(token: NewToken, quota = 0): Promise<TokenRecord> {
    guard(() => this.#db.transaction(() => this.#insert(token, quota)).immediate())
    return withoutSecret((await this.find(token.secretHash))!)
  }

  #insert(token: NewToken, quota = 0): true {
    const db = this.#db
    const maker = token.createdBy
    if (
      maker !== null &&
      db.prepare('SELECT 1 FROM tokens WHERE id = ? AND revoked_at IS NULL').get(maker) === undefined
    ) {
      throw new MakerEndedError(maker)
    }
    const accountId = ensureAccount(db, token.accountName)
    if (quota > 0 && this.#live(accountId) >= quota) throw new QuotaExceededError('tokens', quota)
    db.prepare(
      `INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at, created_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      token.id,
      accountId,
      token.secretHash,
      token.scopes.join(' '),
      token.label,
      Date.now(),
      token.expiresAt?.getTime() ?? null,
      token.createdBy,
    )
    return true
  }

  async createFirst(token: NewToken): Promise<TokenRecord | undefined> {
    // IMMEDIATE takes the write lock before counting, so two processes cannot both see an empty store.
    const first = this.#db.transaction(() => (this.#count.get() === 0 ? this.#insert(token) : false))
    return guard(() => first.immediate()) ? withoutSecret((await this.find(token.secretHash))!) : undefined
  }

  async list(accountName?: string): Promise<TokenRecord[]> {
    const filter = accountName === undefined ? '' : 'WHERE a.name = ?'
    const sql = `SELECT ${TOKEN_COLUMNS} FROM tokens t JOIN accounts a ON a.id = t.account_id ${filter}
      ORDER BY t.created_at, t.id`
    const rows = guard(() => this.#db.prepare(sql).all(...(accountName === undefined ? [] : [accountName])))
    return (rows as TokenRow[]).map((row) => withoutSecret(toToken(row)))
  }

  #live(accountId: number): number {
    return this.#db
      .prepare('SELECT count(*) FROM tokens WHERE account_id = ? AND revoked_at IS NULL')
      .pluck()
      .get(accountId) as number
  }

  // The descendants are marked even when the token was revoked already: one made while it was being revoked is so
  // marked by revoking again.
  async revoke(id: string): Promise<boolean> {
    const db = this.#db
    const revoke = db.transaction((now: number) => {
      const revoked = db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id)
      db.prepare(REVOKE_MADE).run({ id, now })
      return revoked.changes === 1
    })
    return guard(() => revoke.immediate(Date.now()))
  }

  async remove(id: string, accountId: number): Promise<boolean> {
    const db = this.#db
    const remove = db.transaction((now: number) => {
      if (db.prepare('DELETE FROM tokens WHERE id = ? AND account_id = ?').run(id, accountId).changes === 0)
        return false
      db.prepare(REVOKE_MADE).run({ id, now })
      return true
    })
    return guard(() => remove.immediate(Date.now()))
  }

  async accountId(name: string): Promise<number> {
    return guard(() => this.#db.transaction(() => ensureAccount(this.#db, name)).immediate())
  }

  async count(): Promise<number> {
    return guard(() => this.#count.get() as number)
  }
}
