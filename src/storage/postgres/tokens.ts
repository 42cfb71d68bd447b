import { TOKEN_COLUMNS, toToken, withoutSecret, type TokenRow } from '../rows.js'
import { QuotaExceededError, type NewToken, type StoredToken, type TokenRecord, type TokenStore } from '../types.js'
import { connect, type Query, type Sql } from './client.js'
import { guard } from './errors.js'

const SERIALIZATION_FAILURE = '40001'
// Retries of a first token that lost the race to another instance's; contention beyond them is answered 503.
const MAX_ATTEMPTS = 10

/**
 * Stores a token, creating its account when new, in one statement; `onlyFirst`: only while the store holds no token
 * at all (run it at serializable isolation, where two such inserts racing make one fail with 40001); `quota` (above
 * 0): only while the account holds fewer tokens not revoked. Undefined when it stored nothing. The account row
 * counts its tokens not revoked, raised here only while under the quota: ON CONFLICT's WHERE is checked on the row
 * as committed, once its lock is had, so creates racing at the quota cannot pass it, on any instance.
 */
async function insertToken(
  sql: Query,
  token: NewToken,
  options: { onlyFirst?: boolean; quota?: number } = {},
): Promise<TokenRecord | undefined> {
  const when = options.onlyFirst === true ? sql`WHERE NOT EXISTS (SELECT 1 FROM tokens)` : sql``
  const quota = options.quota ?? 0
  const [row] = await sql<TokenRow[]>`WITH account AS (
      INSERT INTO accounts (name, created_at, tokens) SELECT ${token.accountName}, now(), 1 ${when}
      ON CONFLICT (name) DO UPDATE SET tokens = accounts.tokens + 1
        WHERE ${quota}::int = 0 OR accounts.tokens < ${quota}::int
      RETURNING id, name),
    token AS (
      INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at)
      SELECT ${token.id}, id, ${token.secretHash}, ${token.scopes.join(' ')}, ${token.label}, now(), ${token.expiresAt}
      FROM account RETURNING *)
    SELECT ${sql.unsafe(TOKEN_COLUMNS)} FROM token t JOIN account a ON a.id = t.account_id`
  return row === undefined ? undefined : withoutSecret(toToken(row))
}

/** API tokens on PostgreSQL. */
export class PostgresTokens implements TokenStore {
  readonly #sql: Sql
  readonly #url: string

  /** `url`: where to open the connection of its own that creating the first token needs. */
  constructor(sql: Sql, url: string) {
    this.#sql = sql
    this.#url = url
  }

  async find(secretHash: Buffer): Promise<StoredToken | undefined> {
    const sql = this.#sql
    const [row] = await guard(
      () => sql<TokenRow[]>`SELECT ${sql.unsafe(TOKEN_COLUMNS)}
        FROM tokens t JOIN accounts a ON a.id = t.account_id WHERE t.secret_hash = ${secretHash}`,
    )
    return row === undefined ? undefined : toToken(row)
  }

  async create(token: NewToken, quota = 0): Promise<TokenRecord> {
    const created = await guard(() => insertToken(this.#sql, token, { quota }))
    if (created === undefined) throw new QuotaExceededError('tokens', quota)
    return created
  }

  async createFirst(token: NewToken): Promise<TokenRecord | undefined> {
    // Serializable, so that of two instances seeing an empty store at once one fails with 40001 and its retry then
    // sees the other's token. A connection of its own, made serializable when it opens: the pool's statements stay
    // read committed, and no statement needs a transaction of the client's (see client.ts).
    const once = connect(this.#url, 1, { default_transaction_isolation: 'serializable' })
    try {
      return await guard(async () => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await insertToken(once, token, { onlyFirst: true })
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

  async list(accountName?: string): Promise<TokenRecord[]> {
    const sql = this.#sql
    const filter = accountName === undefined ? sql`` : sql`WHERE a.name = ${accountName}`
    const rows = await guard(
      () => sql<TokenRow[]>`SELECT ${sql.unsafe(TOKEN_COLUMNS)}
        FROM tokens t JOIN accounts a ON a.id = t.account_id ${filter} ORDER BY t.created_at, t.id`,
    )
    return rows.map((row) => withoutSecret(toToken(row)))
  }

  async revoke(id: string): Promise<boolean> {
    const sql = this.#sql
    // The account's count of tokens not revoked goes down with it, in the same statement.
    const [row] = await guard(
      () => sql<{ n: bigint }[]>`WITH revoked AS (
          UPDATE tokens SET revoked_at = now() WHERE id = ${id} AND revoked_at IS NULL RETURNING account_id),
        counted AS (UPDATE accounts SET tokens = tokens - 1 WHERE id IN (SELECT account_id FROM revoked))
        SELECT count(*) AS n FROM revoked`,
    )
    return Number(row!.n) === 1
  }

  async remove(id: string, accountId: number): Promise<boolean> {
    const sql = this.#sql
    const [row] = await guard(
      () => sql<{ n: bigint }[]>`WITH removed AS (
          DELETE FROM tokens WHERE id = ${id} AND account_id = ${accountId} RETURNING account_id, revoked_at),
        counted AS (UPDATE accounts SET tokens = tokens - 1
          WHERE id IN (SELECT account_id FROM removed WHERE revoked_at IS NULL))
        SELECT count(*) AS n FROM removed`,
    )
    return Number(row!.n) === 1
  }

  async accountId(name: string): Promise<number> {
    const sql = this.#sql
    // DO UPDATE rather than DO NOTHING, so that an account that exists is returned too.
    const [row] = await guard(
      () => sql<{ id: string }[]>`INSERT INTO accounts (name, created_at) VALUES (${name}, now())
        ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`,
    )
    return Number(row!.id)
  }

  async count(): Promise<number> {
    const sql = this.#sql
    const [row] = await guard(() => sql<{ n: bigint }[]>`SELECT count(*) AS n FROM tokens`)
    return Number(row!.n)
  }
}
