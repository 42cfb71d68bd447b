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
import { connect, endPool, type Query, type Sql } from './client.js'
import { guard } from './errors.js'

const SERIALIZATION_FAILURE = '40001'
// Retries of a first token that lost the race to another instance's; contention beyond them is answered 503.
const MAX_ATTEMPTS = 10

/**
 * Stores a token, creating its account when new, in one statement; `onlyFirst`: only while the store holds no token
 * at all (run it at serializable isolation, where two such inserts racing make one fail with 40001); `quota` (above
 * 0): only while the account holds fewer tokens not revoked. Undefined when it stored nothing. The account row
 * counts its tokens not revoked, raised here only while under the quota: ON CONFLICT's WHERE is checked on the row
 * as committed, once its lock is had, so creates racing at the quota cannot pass it, on any instance. With
 * `createdBy`, only while that token exists and is not revoked (as the statement's snapshot sees it: a revocation
 * committing meanwhile can miss the new token, which find refuses all the same).
 */
async function insertToken(
  sql: Query,
  token: NewToken,
  options: { onlyFirst?: boolean; quota?: number } = {},
): Promise<TokenRecord | undefined> {
  const first = options.onlyFirst === true ? sql`NOT EXISTS (SELECT 1 FROM tokens)` : sql`true`
  const maker = () =>
    token.createdBy === null
      ? sql`true`
      : sql`EXISTS (SELECT 1 FROM tokens WHERE id = ${token.createdBy} AND revoked_at IS NULL)`
  const quota = options.quota ?? 0
  const [row] = await sql<TokenRow[]>`WITH account AS (
      INSERT INTO accounts (name, created_at, tokens) SELECT ${token.accountName}, now(), 1 WHERE ${first} AND ${maker()}
      ON CONFLICT (name) DO UPDATE SET tokens = accounts.tokens + 1
        WHERE (${quota}::int = 0 OR accounts.tokens < ${quota}::int) AND ${maker()}
      RETURNING id, name),
    token AS (
      INSERT INTO tokens (id, account_id, secret_hash, scopes, label, created_at, expires_at, created_by)
      SELECT ${token.id}, id, ${token.secretHash}, ${token.scopes.join(' ')}, ${token.label}, now(), ${token.expiresAt},
        ${token.createdBy}
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

  /**
   * The token with its lineage folded in, as TokenStore.find describes; a lineage broken (a maker deleted, or beyond
   * LINEAGE_DEPTH) counts as revoked at the time of the lookup. Checked at every lookup rather than only marked at
   * revocation, because a create running at the same moment as its maker's revocation can escape the marking (each
   * statement sees the rows committed when it began, so neither sees the other's): the lookup sees the revocation
   * whenever the child was made. Each step up is a primary key lookup, and a token made otherwise has no maker, so
   * its lookup costs one step more than before.
   */
  async find(secretHash: Buffer): Promise<StoredToken | undefined> {
    const sql = this.#sql
    const [row] = await guard(
      () => sql<TokenRow[]>`WITH RECURSIVE lineage (created_by, expires_at, revoked_at, depth) AS (
          SELECT created_by, expires_at, revoked_at, 0 FROM tokens WHERE secret_hash = ${secretHash}
          UNION ALL
          SELECT m.created_by, m.expires_at, m.revoked_at, l.depth + 1
            FROM lineage l JOIN tokens m ON m.id = l.created_by WHERE l.depth < ${LINEAGE_DEPTH}),
        folded AS (
          SELECT min(expires_at) AS expires_at, min(revoked_at) AS revoked_at,
            (SELECT created_by FROM lineage ORDER BY depth DESC LIMIT 1) IS NOT NULL AS broken
          FROM lineage)
        SELECT t.id, t.account_id, a.name AS account_name, t.secret_hash, t.scopes, t.label, t.created_at,
          t.created_by, f.expires_at,
          CASE WHEN f.broken THEN coalesce(f.revoked_at, now()) ELSE f.revoked_at END AS revoked_at
        FROM tokens t JOIN accounts a ON a.id = t.account_id CROSS JOIN folded f WHERE t.secret_hash = ${secretHash}`,
    )
    return row === undefined ? undefined : toToken(row)
  }

  async create(token: NewToken, quota = 0): Promise<TokenRecord> {
    const sql = this.#sql
    const created = await guard(() => insertToken(sql, token, { quota }))
    if (created !== undefined) return created
    const maker = token.createdBy
    if (maker !== null) {
      const [live] = await guard(() => sql`SELECT 1 FROM tokens WHERE id = ${maker} AND revoked_at IS NULL`)
      if (live === undefined) throw new MakerEndedError(maker)
    }
    throw new QuotaExceededError('tokens', quota)
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
      await endPool(once)
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

  // The descendants are marked even when the token was revoked already: one made while it was being revoked is so
  // marked by revoking again. The account's count of tokens not revoked goes down with them, in the same statement.
  async revoke(id: string): Promise<boolean> {
    const sql = this.#sql
    const [row] = await guard(
      () => sql<{ n: bigint }[]>`WITH RECURSIVE made (id, depth) AS (
          SELECT id, 1 FROM tokens WHERE created_by = ${id}
          UNION ALL
          SELECT t.id, m.depth + 1 FROM made m JOIN tokens t ON t.created_by = m.id WHERE m.depth < ${LINEAGE_DEPTH}),
        revoked AS (
          UPDATE tokens SET revoked_at = now()
          WHERE revoked_at IS NULL AND (id = ${id} OR id IN (SELECT id FROM made)) RETURNING id, account_id),
        counted AS (
          UPDATE accounts a SET tokens = a.tokens - r.n
          FROM (SELECT account_id, count(*) AS n FROM revoked GROUP BY account_id) r WHERE a.id = r.account_id)
        SELECT count(*) AS n FROM revoked WHERE id = ${id}`,
    )
    return Number(row!.n) === 1
  }

  async remove(id: string, accountId: number): Promise<boolean> {
    const sql = this.#sql
    // The statement's snapshot still holds the removed row's children, so `made` starts from the id.
    const [row] = await guard(
      () => sql<{ n: bigint }[]>`WITH RECURSIVE removed AS (
          DELETE FROM tokens WHERE id = ${id} AND account_id = ${accountId} RETURNING id, revoked_at),
        made (id, depth) AS (
          SELECT t.id, 1 FROM removed r JOIN tokens t ON t.created_by = r.id
          UNION ALL
          SELECT t.id, m.depth + 1 FROM made m JOIN tokens t ON t.created_by = m.id WHERE m.depth < ${LINEAGE_DEPTH}),
        revoked AS (
          UPDATE tokens SET revoked_at = now() WHERE revoked_at IS NULL AND id IN (SELECT id FROM made) RETURNING id),
        ended AS (
          SELECT (SELECT count(*) FROM removed WHERE revoked_at IS NULL) + (SELECT count(*) FROM revoked) AS n),
        counted AS (
          UPDATE accounts SET tokens = tokens - ended.n FROM ended WHERE id = ${accountId} AND ended.n > 0)
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
