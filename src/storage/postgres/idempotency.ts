import {
  QuotaExceededError,
  StorageUnavailableError,
  type ClaimOutcome,
  type IdempotencyStore,
  type KeyClaim,
  type StorageLimits,
} from '../types.js'
import { heldOutcome, type HeldKey } from '../idempotency-rules.js'
import type { Sql } from './client.js'
import { guard, retryingDeadlocks } from './errors.js'
import { PLANT_COUNT_STRIPES } from './plants.js'

// Each backend counts on a row of its own, as plant counts do (plants.ts), so an account's claims do not queue on
// one row lock; the quota reads the sum, so claims racing at it may pass it by as many as run at once.
const OWN_STRIPE = `(pg_backend_pid() % ${PLANT_COUNT_STRIPES})::smallint`

/** A key's claim as it stands, unless expired: an expired key's answer is never replayed. */
const HELD = `SELECT fingerprint, status, body FROM idempotency_keys
  WHERE account_id = $1 AND key = $2 AND expires_at > now()`

/**
 * A claim ($1 account, $2 key, $3 fingerprint, $4 lease, $5 lease ms, $6 ttl ms, $7 quota): a new key within the
 * quota, or one expired or whose lease lapsed under the same fingerprint taken over (no new key, so not counted).
 * Then what the key held before, when the claim took nothing: as this statement's snapshot saw it. A key at the quota
 * may be taken over when expired: that adds no key.
 */
const CLAIM = `WITH held AS (${HELD}),
  room AS (SELECT $7::bigint = 0 OR coalesce(sum(keys), 0) < $7::bigint AS ok
    FROM idempotency_key_counts WHERE account_id = $1),
  claimed AS (INSERT INTO idempotency_keys AS k (account_id, key, fingerprint, lease, locked_until, expires_at)
    SELECT $1, $2, $3, $4, now() + $5 * interval '1 millisecond', now() + $6 * interval '1 millisecond'
    WHERE EXISTS (SELECT 1 FROM idempotency_keys WHERE account_id = $1 AND key = $2) OR (SELECT ok FROM room)
    ON CONFLICT (account_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, lease = excluded.lease,
      locked_until = excluded.locked_until, expires_at = excluded.expires_at, status = NULL, body = NULL
    WHERE k.expires_at <= now() OR (k.status IS NULL AND k.locked_until <= now() AND k.fingerprint = excluded.fingerprint)
    RETURNING xmax = 0 AS added),
  counted AS (INSERT INTO idempotency_key_counts (account_id, stripe, keys) SELECT $1, ${OWN_STRIPE}, 1 FROM claimed
    WHERE added ON CONFLICT (account_id, stripe) DO UPDATE SET keys = idempotency_key_counts.keys + 1)
  SELECT EXISTS (SELECT 1 FROM claimed) AS claimed, (SELECT ok FROM room) AS room, held.*
  FROM (SELECT 1) one LEFT JOIN held ON true`

/** Keys gone ($1 account, $2 key, $3 lease: a release; or every expired one up to $4), and their counts lowered. */
const uncount = (gone: string) => `WITH gone AS (${gone} RETURNING account_id),
  counted AS (INSERT INTO idempotency_key_counts (account_id, stripe, keys)
    SELECT account_id, ${OWN_STRIPE}, -count(*) FROM gone GROUP BY account_id
    ON CONFLICT (account_id, stripe) DO UPDATE SET keys = idempotency_key_counts.keys + excluded.keys)
  SELECT count(*)::int AS n FROM gone`

const RELEASE = uncount(
  'DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND lease = $3 AND status IS NULL',
)

// SKIP LOCKED: instances purging at once take different keys; a key claimed meanwhile is checked again.
const PURGE = uncount(`DELETE FROM idempotency_keys WHERE (account_id, key) IN (SELECT account_id, key
    FROM idempotency_keys WHERE expires_at <= now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
  AND expires_at <= now()`)

const COMPLETE = `UPDATE idempotency_keys SET status = $4, body = $5
  WHERE account_id = $1 AND key = $2 AND lease = $3 AND status IS NULL`

type ClaimRow = HeldKey & { claimed: boolean; room: boolean }

// Claims of a key that another request takes and frees between their statements, before this one gives up (503).
const MAX_ATTEMPTS = 5

const PREPARED = { prepare: true }

/** Idempotency keys on PostgreSQL: each change one statement, with its count. */
export class PostgresIdempotency implements IdempotencyStore {
  readonly #sql: Sql
  readonly #quota: number

  constructor(sql: Sql, limits: StorageLimits) {
    this.#sql = sql
    this.#quota = limits.idempotencyKeysPerAccount
  }

  async claim(claim: KeyClaim): Promise<ClaimOutcome> {
    const sql = this.#sql
    const values = [claim.accountId, claim.key, claim.fingerprint, claim.lease, claim.leaseMs, claim.ttlMs, this.#quota]
    return guard(async () => {
      for (let attempt = 1; ; attempt++) {
        const [row] = await retryingDeadlocks(() => sql.unsafe<ClaimRow[]>(CLAIM, values, PREPARED))
        if (row!.claimed) return { state: 'claimed' }
        if (row!.fingerprint !== null) return heldOutcome(row!, claim.fingerprint)
        // Claimed by a request that committed after this statement's snapshot was taken (a new key, or an expired one
        // taken over, which the snapshot does not show): read it as it is now, before any quota is blamed.
        const [held] = await sql.unsafe<HeldKey[]>(HELD, [claim.accountId, claim.key], PREPARED)
        if (held !== undefined) return heldOutcome(held, claim.fingerprint)
        if (!row!.room) throw new QuotaExceededError('idempotency keys', this.#quota)
        // Gone again (released, purged) by then: claim once more.
        if (attempt === MAX_ATTEMPTS) throw new StorageUnavailableError(new Error('the key kept changing hands'))
      }
    })
  }

  async complete(accountId: number, key: string, lease: string, status: number, body: string): Promise<void> {
    await guard(() => this.#sql.unsafe(COMPLETE, [accountId, key, lease, status, body], PREPARED))
  }

  async release(accountId: number, key: string, lease: string): Promise<void> {
    await guard(() => retryingDeadlocks(() => this.#sql.unsafe(RELEASE, [accountId, key, lease], PREPARED)))
  }

  async purgeExpired(limit: number): Promise<number> {
    const [gone] = await guard(() =>
      retryingDeadlocks(() => this.#sql.unsafe<{ n: number }[]>(PURGE, [limit], PREPARED)),
    )
    return gone!.n
  }
}
