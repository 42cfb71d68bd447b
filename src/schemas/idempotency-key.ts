import { Type, type Static } from '@sinclair/typebox'
import { IDEMPOTENCY_KEY } from '../text-rules.js'

/** The request header of a create that may be retried safely (draft-ietf-httpapi-idempotency-key-header). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key'
/** The answer header of a replayed answer: the first request's status and body, sent again. */
export const REPLAYED_HEADER = 'idempotent-replayed'

/** Request headers of an operation that takes an Idempotency-Key. */
export const IdempotencyHeaders = Type.Object({
  [IDEMPOTENCY_KEY_HEADER]: Type.Optional(
    Type.String({
      pattern: IDEMPOTENCY_KEY.pattern,
      description:
        'A key of the client\'s choosing, new for each request (a UUID, say), so that a retry of this request with the same key is done at most once: the first answer (status and body) is kept for `PLANTSTORE_IDEMPOTENCY_KEY_HOURS` (24 h by default) and replayed, with `Idempotent-Replayed: true`. The same key with a different request is 422 (42201); while the first request runs, 409 (40903) with `Retry-After`. Keys are per account. An answer of 500 or more is not kept: the retry runs again. Sent as a Structured Field string (`"key"`) or bare.',
      examples: ['"8e03978e-40d5-43e8-bc93-6894a57f9324"'],
    }),
  ),
})
export type IdempotencyHeaders = Static<typeof IdempotencyHeaders>

/** The header of an answer that may be a replay, for the OpenAPI document. */
export const REPLAYED_HEADERS = {
  'Idempotent-Replayed': Type.Literal('true', {
    description: 'Present when the answer is the kept answer to an earlier request with the same Idempotency-Key',
  }),
}

/** The key a valid header names: the same with or without the Structured Field string's quotes. */
export function idempotencyKey(header: string): string {
  return header.startsWith('"') ? header.slice(1, -1) : header
}
