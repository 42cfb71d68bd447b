import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import fc from 'fast-check'
import { after, describe, test } from 'node:test'
import { Redis } from 'ioredis'
import { memoryRateStore, redisRateStore } from '../../src/limits/rate-store.js'
import { waitSeconds } from '../../src/limits/too-many.js'

// The Redis half runs when PLANTSTORE_TEST_REDIS_URL is set (CI sets it and PLANTSTORE_TEST_REQUIRE_REDIS=1).
const REDIS_URL = process.env.PLANTSTORE_TEST_REDIS_URL || undefined
const redisRequired = process.env.PLANTSTORE_TEST_REQUIRE_REDIS === '1'

describe('rate store in this process', () => {
  let clock = 1_000_000
  const store = memoryRateStore({ max: 4, windowMs: 4000 }, 100, () => clock)
  const take = (key = 'k') => store.take(key)

  test('lets a burst of the whole budget through, counting down, then refuses until one unit is refilled', () => {
    const taken = [1, 2, 3, 4, 5].map(() => take())
    assert.deepEqual(
      taken.map((budget) => [budget.allowed, budget.remaining]),
      [
        [true, 3],
        [true, 2],
        [true, 1],
        [true, 0],
        [false, 0],
      ],
    )
    assert.deepEqual(taken[4], { allowed: false, remaining: 0, nextMs: 1000 }, 'one unit a second (4 per 4 s)')
    clock += 999
    assert.equal(store.peek('k').allowed, false, 'not a millisecond early')
    clock += 1
    assert.deepEqual(take(), { allowed: true, remaining: 0, nextMs: 1000 })
  })

  test('refills continuously up to the budget and no further, and a peek takes nothing', () => {
    clock += 2500
    assert.deepEqual(store.peek('k'), { allowed: true, remaining: 1, nextMs: 500 })
    assert.deepEqual(store.peek('k'), { allowed: true, remaining: 1, nextMs: 500 })
    clock += 60_000
    assert.deepEqual(take(), { allowed: true, remaining: 3, nextMs: 1000 }, 'a long wait refills the budget, no more')
    assert.deepEqual(take('other'), { allowed: true, remaining: 3, nextMs: 1000 }, 'each key its own budget')
  })

  test('lets exactly the whole budget through in a burst, whatever the rate and the clock reads', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.constantFrom(1000, 60_000, 3_600_000),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        (max, windowMs, at) => {
          const burst = memoryRateStore({ max, windowMs }, 10, () => at)
          const taken = Array.from({ length: max + 1 }, () => burst.take('k'))
          const through = taken.filter((budget) => budget.allowed)
          assert.equal(through.length, max, `${max} per ${windowMs} ms at ${at}`)
          assert.deepEqual([through[0]!.remaining, through.at(-1)!.remaining], [max - 1, 0])
        },
      ),
      { numRuns: 300 },
    )
  })

  test('says the next unit comes in one interval, in whole seconds, whatever the clock reads', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.constantFrom(1000, 60_000, 180_000, 3_600_000),
        // The monotonic clock's readings: ms since the process started.
        fc.double({ min: 0, max: 1e7, noNaN: true }),
        (max, windowMs, at) => {
          const burst = memoryRateStore({ max, windowMs }, 10, () => at)
          const taken = Array.from({ length: max + 1 }, () => burst.take('k'))
          // Exact: integer division of integers that comes out whole is exact in floating point too.
          const interval = Math.max(1, Math.ceil(windowMs / max / 1000))
          const waits = [taken[0]!, taken.at(-1)!].map((budget) => waitSeconds(budget.nextMs))
          assert.deepEqual(waits, [interval, interval], `${max} per ${windowMs} ms at ${at}`)
        },
      ),
      { numRuns: 300, examples: [[3, 180_000, 51_793.10497148704]] },
    )
  })

  test('forgets the key left alone longest beyond its bound, never the one being used', () => {
    const bounded = memoryRateStore({ max: 1, windowMs: 60_000 }, 2, () => clock)
    bounded.take('a')
    bounded.take('b')
    bounded.take('c') // evicts a
    assert.equal(bounded.take('a').allowed, true, 'a forgotten key starts full')
    assert.equal(bounded.take('c').allowed, false)
  })
})

describe('rate store shared through Redis', { skip: REDIS_URL || redisRequired ? false : 'no Redis' }, () => {
  const redis = new Redis(REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
  after(() => redis.quit())
  const prefix = `plantstore-test:${randomUUID()}:`

  test('gives two instances one budget that counts down, and refills it one unit at a time', async () => {
    const rate = { max: 3, windowMs: 1500 }
    const [one, two] = [redisRateStore(redis, rate, prefix), redisRateStore(redis, rate, prefix)]
    const remaining = []
    for (const store of [one, two, one]) remaining.push((await store.take('k')).remaining)
    assert.deepEqual(remaining, [2, 1, 0])
    const refused = await two.take('k')
    assert.equal(refused.allowed, false)
    assert.ok(refused.nextMs > 0 && refused.nextMs <= 500, String(refused.nextMs))
    assert.equal((await one.peek('k')).allowed, false, 'the peek agrees and takes nothing')
    await new Promise((resolve) => setTimeout(resolve, refused.nextMs + 20))
    const refilled = await one.take('k')
    assert.deepEqual([refilled.allowed, refilled.remaining], [true, 0], 'one unit back, not the whole budget')
    assert.equal((await two.take('k')).allowed, false)
    assert.ok((await redis.pttl(`${prefix}k`)) <= 1500, 'the key expires once its budget would be full again')
  })

  test('lets exactly the whole budget through in a burst at a rate whose interval is a fraction (7 a second)', async () => {
    const store = redisRateStore(redis, { max: 7, windowMs: 1000 }, `${prefix}fraction:`)
    const taken = []
    for (let i = 0; i < 8; i++) taken.push(await store.take('k'))
    assert.deepEqual(
      taken.map((budget) => (budget.allowed ? budget.remaining : 'refused')),
      [6, 5, 4, 3, 2, 1, 0, 'refused'],
    )
  })

  test('counts a rate of a million a second, as the benchmark sets it, instead of rounding its interval away', async () => {
    const store = redisRateStore(redis, { max: 1_000_000, windowMs: 1000 }, `${prefix}million:`)
    const first = await store.take('k')
    const second = await store.take('k')
    assert.ok(first.remaining >= 999_998 && second.remaining < 1_000_000, `${first.remaining}, ${second.remaining}`)
  })
})
