import type { ClaimOutcome } from './types.js'

/** A key's claim as both backends read it back. */
export interface HeldKey {
  fingerprint: Buffer | null
  status: number | null
  body: string | null
}

/**
 * What a key another claim holds says to a request: the same request (done, with its answer; or still running, its
 * lease not lapsed, since a lapsed one with this fingerprint is taken over by the claim itself), or another.
 */
export function heldOutcome(row: HeldKey, fingerprint: Buffer): ClaimOutcome {
  if (row.fingerprint?.equals(fingerprint) !== true) return { state: 'mismatch' }
  if (row.status !== null && row.body !== null) return { state: 'done', status: row.status, body: row.body }
  return { state: 'running' }
}
