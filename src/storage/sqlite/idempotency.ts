import type { Database, Statement } from 'better-sqlite3'
import {
  QuotaExceededError,
  type ClaimOutcome,
  type IdempotencyStore,
  type KeyClaim,
  type StorageLimits,
} from '../types.js'
import { heldOutcome, type HeldKey } from '../idempotency-rules.js'
import type { GroupCommit } from './group-commit.js'

/** Idempotency keys on SQLite: every change through the group commit, the quota exact (one writer at a time). */
export class SqliteIdempotency implements IdempotencyStore {
  readonly #writes: GroupCommit
  readonly #quota: number
  readonly #find: Statement
  readonly #claim: Statement
  readonly #complete: Statement
  readonly #release: Statement
  readonly #purge: Statement

  constructor(db: Database, writes: GroupCommit, limits: StorageLimits) {
    this.#writes = writes
    const quota = (this.#quota = limits.idempotencyKeysPerAccount)
    this.#find = db.prepare('SELECT fingerprint, status, body FROM idempotency_keys WHERE account_id = ? AND key = ?')
    // One statement: a new key (within the quota), or one expired or whose lease lapsed under the same fingerprint
    // taken over. Taking over adds no key, so it passes at the quota.
    this.#claim = db.prepare(
      `INSERT INTO idempotency_keys (account_id, key, fingerprint, lease, locked_until, expires_at)
       SELECT :account, :key, :fingerprint, :lease, :now + :leaseMs, :now + :ttlMs
       WHERE ${quota} = 0 OR :exists
         OR coalesce((SELECT keys FROM idempotency_key_counts WHERE account_id = :account), 0) < ${quota}
       ON CONFLICT (account_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, lease = excluded.lease,
         locked_until = excluded.locked_until, expires_at = excluded.expires_at, status = NULL, body = NULL
       WHERE expires_at <= :now OR (status IS NULL AND locked_until <= :now AND fingerprint = excluded.fingerprint)`,
    )
    this.#complete = db.prepare(
      'UPDATE idempotency_keys SET status = ?, body = ? WHERE account_id = ? AND key = ? AND lease = ? AND status IS NULL',
    )
    this.#release = db.prepare(
      'DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND lease = ? AND status IS NULL',
    )
    this.#purge = db.prepare(
      `DELETE FROM idempotency_keys WHERE (account_id, key) IN
        (SELECT account_id, key FROM idempotency_keys WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`,
    )
  }

  claim(claim: KeyClaim): Promise<ClaimOutcome> {
    return this.#writes.run(() => {
      const now = Date.now()
      const row = this.#find.get(claim.accountId, claim.key) as HeldKey | undefined
      const claimed = this.#claim.run({
        account: claim.accountId,
        key: claim.key,
        fingerprint: claim.fingerprint,
        lease: claim.lease,
        now,
        leaseMs: claim.leaseMs,
        ttlMs: claim.ttlMs,
        exists: row === undefined ? 0 : 1,
      })
      if (claimed.changes === 1) return { state: 'claimed' }
      if (row === undefined) throw new QuotaExceededError('idempotency keys', this.#quota)
      return heldOutcome(row, claim.fingerprint)
    })
  }

  async complete(accountId: number, key: string, lease: string, status: number, body: string): Promise<void> {
    await this.#writes.run(() => this.#complete.run(status, body, accountId, key, lease))
  }

  async release(accountId: number, key: string, lease: string): Promise<void> {
    await this.#writes.run(() => this.#release.run(accountId, key, lease))
  }

  purgeExpired(limit: number): Promise<number> {
    return this.#writes.run(() => this.#purge.run(Date.now(), limit).changes)
  }
}
