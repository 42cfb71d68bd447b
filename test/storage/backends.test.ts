import assert from 'node:assert/strict'
import { test } from 'node:test'
import { backends, POSTGRES_URL } from '../helpers/backends.js'

// The one line a run without PostgreSQL prints about the half it skipped; CI sets
// PLANTSTORE_TEST_REQUIRE_POSTGRES=1 so that a missing server fails the run instead.
const required = process.env.PLANTSTORE_TEST_REQUIRE_POSTGRES === '1'
const skip =
  POSTGRES_URL === undefined && !required
    ? 'PostgreSQL half of the suite skipped: set PLANTSTORE_TEST_POSTGRES_URL=postgres://user@host:5432/db to run it'
    : false

test('runs every suite against PostgreSQL too', { skip }, () => {
  assert.ok(
    POSTGRES_URL !== undefined,
    'PLANTSTORE_TEST_REQUIRE_POSTGRES=1 but PLANTSTORE_TEST_POSTGRES_URL is not set',
  )
  assert.deepEqual(
    backends.map((backend) => backend.name),
    ['sqlite', 'postgres'],
  )
})
