import assert from 'node:assert/strict'
import { test } from 'node:test'
import { REFERENCE, rowFor, type Measurement } from '../../bench/report-rows.js'
import type { WrkResult } from '../../bench/wrk.js'

function run(server: string, round: number, rps: number): Measurement {
  const wrk = { rps, p50Ms: 1, p99Ms: 2, non2xx: 0, socketErrors: 0 } as WrkResult
  return { scenario: 'get', round, server, account: 'list', wrk, rssBytes: 0, core: undefined }
}

// Round 2 is the reference's slow round and the plain handler's fast one: only pairing runs of the same round
// gives these ratios (medians of each round's ratio, never a ratio of medians).
const measurements = [
  [REFERENCE, 40_000, 20_000, 40_000],
  ['SQLite plain', 16_000, 20_000, 16_000],
  ['SQLite', 8_000, 6_000, 6_400],
].flatMap(([server, ...rates]) => rates.map((rps, i) => run(server as string, i + 1, rps as number)))

test("gives a service's req/s as per-round ratios to the reference and to its plain handler", () => {
  const row = rowFor(measurements, 'SQLite', 'list', 'SQLite plain')
  assert.deepEqual(row?.ratios, [0.2, 0.3, 0.16])
  assert.deepEqual(row?.vsPlain, [0.5, 0.3, 0.4])
})

test('compares the plain handler with the reference only, and the reference with nothing', () => {
  const plain = rowFor(measurements, 'SQLite plain', 'list')
  assert.deepEqual([plain?.ratios, plain?.vsPlain], [[0.4, 1, 0.4], []])
  const reference = rowFor(measurements, REFERENCE, 'list')
  assert.deepEqual([reference?.ratios, reference?.vsPlain], [[], []])
})
