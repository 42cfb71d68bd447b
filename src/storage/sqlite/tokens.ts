import type { Database, Statement } from 'better-sqlite3'
import { TOKEN_COLUMNS, toToken, withoutSecret, type TokenRow } from '../rows.js'
import { QuotaExceededError, type NewToken, type StoredToken, type TokenRecord, type TokenStore } from '../types.js'
import { ensureAccount } from './accounts.js'
import { guard } from './errors.js'

/** API tokens on SQLite. */
export class SqliteTokens implements TokenStore {
  readonly #db: Database
  readonly #find: Statement
  readonly #count: Statement

  constructor(db: Database) {
    this.#db = db
    this.#find = db.prepare(
      `SELECT ${TOKEN_COLUMNS} FROM tokens t JOIN accounts a ON a.id = t.account_id WHERE t.secret_hash = ?`,
    )
    this.#count = db.prepare('SELECT count(*) FROM tokens').pluck()
  }

  async find(secretHash: Buffer): Promise<StoredToken | undefined> {
    const row = guard(() => this.#find.get(secretHash) as TokenRow | undefined)
    return row === undefined ? undefined : toToken(row)
  }

  async create(token: NewToken, quota = 0): Promise<TokenRecord> {
    guard(() => this.#db.transaction(() => this.#insert(token, quota)).immediate())
    return withoutSecret((await this.find(token.secretHash))!)
  }

  #insert(token: NewToken, quota = 0): true {
    const db = this.#db
    const accountId = ensureAccount(db, token.accountName)
    if (quota > 0 && this.#live(accountId) >= quota) throw new QuotaExceededError('tokens', quota)
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

  async revoke(id: string): Promise<boolean> {
    const sql = 'UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'
    return guard(() => this.#db.prepare(sql).run(Date.now(), id).changes === 1)
  }

  async remove(id: string, accountId: number): Promise<boolean> {
    return guard(
      () => this.#db.prepare('DELETE FROM tokens WHERE id = ? AND account_id = ?').run(id, accountId).changes === 1,
    )
  }

  async accountId(name: string): Promise<number> {
    return guard(() => this.#db.transaction(() => ensureAccount(this.#db, name)).immediate())
  }

  async count(): Promise<number> {
    return guard(() => this.#count.get() as number)
  }
}
