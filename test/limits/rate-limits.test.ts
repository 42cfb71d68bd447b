import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import type { RateLimitOptions } from '../../src/limits/rate-limits.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import { bearer, checkEveryResponse } from '../helpers/app.js'
import { backends, freshStorage, type TestBackend } from '../helpers/backends.js'

// The Redis half runs when PLANTSTORE_TEST_REDIS_URL is set (CI sets it and PLANTSTORE_TEST_REQUIRE_REDIS=1).
const REDIS_URL = process.env.PLANTSTORE_TEST_REDIS_URL || undefined
const redisRequired = process.env.PLANTSTORE_TEST_REQUIRE_REDIS === '1'
const cleanups: Array<() => Promise<unknown>> = []
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

/** An app with `limits`, on `storage` (another app's, say) or a fresh store of `backend` (the first by default). */
async function appWith(
  limits: Omit<RateLimitOptions, 'onLimited'>,
  {
    storage,
    backend = backends[0]!,
    metricsToken,
  }: { storage?: InstrumentedStorage; backend?: TestBackend; metricsToken?: string } = {},
) {
  let store = storage
  if (store === undefined) {
    const fresh = await freshStorage(backend)
    cleanups.push(fresh.dispose)
    store = fresh.storage
  }
  const app = checkEveryResponse(await buildApp({ storage: store, rateLimit: limits, metricsToken }))
  cleanups.push(() => app.close())
  return { app, storage: store }
}

const list = (app: FastifyInstance, headers: Record<string, string>) =>
  app.inject({ method: 'GET', url: '/plants', headers })

/** One policy's item of a RateLimit field, its parameters as numbers: `"token";r=2;t=1` → { r: 2, t: 1 }. */
function limitItem(res: { headers: Record<string, unknown> }, policy: string): Record<string, number> | undefined {
  const item = String(res.headers.ratelimit ?? '')
    .split(', ')
    .find((entry) => entry.startsWith(`"${policy}";`))
  if (item === undefined) return undefined
  return Object.fromEntries(
    item
      .split(';')
      .slice(1)
      .map((param) => param.split('='))
      .map(([name, value]) => [name!, Number(value)]),
  )
}

for (const backend of backends)
  describe(`per-account rate limit (${backend.name})`, () => {
    test('counts every token of one account in one budget, answering 429 past it; other accounts are not affected', async () => {
      const { app, storage } = await appWith(
        {
          perToken: { max: 100, windowMs: 60_000 },
          perAccount: { max: 4, windowMs: 60_000 },
          authFailures: { max: 0, windowMs: 1000 },
        },
        { backend },
      )
      const tokens = await Promise.all(
        [1, 2, 3].map(async () => bearer((await issueToken(storage, { accountName: 'a' })).secret)),
      )
      const statuses = []
      for (let i = 0; i < 6; i++) statuses.push((await list(app, tokens[i % 3]!)).statusCode)
      assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429])
      const limited = await list(app, tokens[0]!)
      assert.equal(limited.json().error, 42901)
      // One request refilled every 15 s (4 a minute).
      assert.equal(limited.json().message, "the account's rate limit of 4 requests exceeded; retry in 15 seconds")
      assert.equal(limited.headers['retry-after'], '15')
      const other = bearer((await issueToken(storage, { accountName: 'b' })).secret)
      assert.equal((await list(app, other)).statusCode, 200)
      const metrics = await app.inject({ method: 'GET', url: '/metrics' })
      assert.match(metrics.body, /^plantstore_rate_limited_total\{limit="account"\} 3$/m)
    })

    test("answers the account's 429 with Retry-After and a RateLimit field saying the account's budget is spent", async () => {
      const { app, storage } = await appWith(
        {
          perToken: { max: 100, windowMs: 60_000 },
          perAccount: { max: 2, windowMs: 60_000 },
          authFailures: { max: 0, windowMs: 1000 },
        },
        { backend },
      )
      const token = bearer((await issueToken(storage, { accountName: 'a' })).secret)
      assert.equal((await list(app, token)).statusCode, 200)
      assert.equal((await list(app, token)).statusCode, 200)
      const limited = await list(app, token)
      assert.equal(limited.statusCode, 429)
      assert.equal(limited.headers['ratelimit-policy'], '"token";q=100;w=60, "account";q=2;w=60')
      assert.deepEqual(limitItem(limited, 'account'), { r: 0, t: 30 })
      assert.equal(limitItem(limited, 'token')?.r, 97, 'the token had budget left: the account refused')
      // Retry-After no earlier than the end of the effective window (draft-ietf-httpapi-ratelimit-headers-11, §6).
      assert.equal(limited.headers['retry-after'], '30')
    })

    test('leaves the routes without a token alone, the reference registered before authentication included', async () => {
      const { app } = await appWith(
        {
          perToken: { max: 1, windowMs: 60_000 },
          perAccount: { max: 1, windowMs: 60_000 },
          authFailures: { max: 0, windowMs: 1000 },
        },
        { backend },
      )
      for (const url of ['/docs', '/docs', '/openapi.json', '/openapi.json', '/healthz', '/healthz']) {
        assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url)
      }
    })
  })

/**
 * Token T1 of an account floods past its own limit of 3; T2 of the same account then still gets through, up to the
 * account's budget of 6: T1's refused requests were not counted for the account. `apps` take turns.
 */
async function floodOneToken(apps: FastifyInstance[], storage: InstrumentedStorage) {
  const [t1, t2] = await Promise.all(
    [1, 2].map(async () => bearer((await issueToken(storage, { accountName: 'flooded' })).secret)),
  )
  const app = (i: number) => apps[i % apps.length]!
  const flood = []
  for (let i = 0; i < 10; i++) flood.push((await list(app(i), t1!)).statusCode)
  assert.deepEqual(flood, [200, 200, 200, 429, 429, 429, 429, 429, 429, 429])
  const other = []
  for (let i = 0; i < 4; i++) other.push((await list(app(i), t2!)).statusCode)
  assert.deepEqual(other, [200, 200, 200, 429], 'T2 gets the account’s three requests left, then its own limit')
  const limited = await list(app(0), bearer((await issueToken(storage, { accountName: 'flooded' })).secret))
  assert.equal(limited.statusCode, 429, 'the account’s seventh request')
  assert.match(limited.json().message, /^the account's rate limit of 6 requests/)
}

const FLOOD_LIMITS = {
  perToken: { max: 3, windowMs: 60_000 },
  perAccount: { max: 6, windowMs: 60_000 },
  authFailures: { max: 0, windowMs: 1000 },
}

describe('per-token and per-account limits together', () => {
  test('name a limit of one request in the singular', async () => {
    const perToken = { max: 1, windowMs: 60_000 }
    const { app, storage } = await appWith({ perToken, authFailures: { max: 0, windowMs: 1000 } })
    const token = bearer((await issueToken(storage, { accountName: 'a' })).secret)
    assert.equal((await list(app, token)).statusCode, 200)
    assert.equal((await list(app, token)).json().message, 'rate limit of 1 request exceeded; retry in 1 minute')
    const perAccount = { max: 1, windowMs: 60_000 }
    const account = await appWith({ perToken: { max: 100, windowMs: 60_000 }, perAccount, authFailures: perToken })
    const other = bearer((await issueToken(account.storage, { accountName: 'b' })).secret)
    assert.equal((await list(account.app, other)).statusCode, 200)
    assert.equal(
      (await list(account.app, other)).json().message,
      "the account's rate limit of 1 request exceeded; retry in 1 minute",
    )
  })

  test('a token refused by its own limit does not spend its account’s budget: the account’s other tokens get through', async () => {
    const { app, storage } = await appWith(FLOOD_LIMITS)
    await floodOneToken([app], storage)
  })
})

for (const backend of backends)
  describe(`per-token rate limit (${backend.name})`, () => {
    test('answers 429 in the Error shape with Retry-After over the limit, the RateLimit field counting down', async () => {
      const { app, storage } = await appWith(
        {
          // A minute to refill each: the requests below never see one come back, however slow the machine.
          perToken: { max: 3, windowMs: 180_000 },
          authFailures: { max: 0, windowMs: 1000 },
        },
        { backend },
      )
      const headers = bearer((await issueToken(storage, { accountName: 'a' })).secret)
      for (const remaining of [2, 1, 0]) {
        const res = await list(app, headers)
        assert.equal(res.statusCode, 200)
        assert.equal(res.headers['ratelimit-policy'], '"token";q=3;w=180')
        assert.equal(limitItem(res, 'token')?.r, remaining)
        assert.ok(
          limitItem(res, 'token')!.t! >= 1 && limitItem(res, 'token')!.t! <= 60,
          res.headers.ratelimit as string,
        )
      }
      const limited = await list(app, headers)
      assert.equal(limited.statusCode, 429)
      assert.equal(limited.json().error, 42901)
      assert.match(limited.json().message, /^rate limit of 3 requests exceeded; retry in (59 seconds|1 minute)$/)
      assert.ok(Number(limited.headers['retry-after']) >= limitItem(limited, 'token')!.t!)
      assert.equal(limitItem(limited, 'token')?.r, 0)
      const other = bearer((await issueToken(storage, { accountName: 'b' })).secret)
      assert.equal((await list(app, other)).statusCode, 200, 'another token has its own budget')
      const metrics = await app.inject({ method: 'GET', url: '/metrics' })
      assert.match(metrics.body, /^plantstore_rate_limited_total\{limit="token"\} 1$/m)
    })

    test('refills continuously, one request every window/limit, rather than all at once when a window ends', async () => {
      // The budgets run on the test's clock: each answer below is read at an exact instant, however slow the machine.
      const start = 1_000_000
      let clock = start
      const { app, storage } = await appWith(
        // One refilled every 2 s.
        { perToken: { max: 4, windowMs: 8000 }, authFailures: { max: 0, windowMs: 1000 }, now: () => clock },
        { backend },
      )
      const headers = bearer((await issueToken(storage, { accountName: 'a' })).secret)
      /** The answers to `count` requests sent `at` ms after the start, as `status r t` (Retry-After checked too). */
      const answersAt = async (at: number, count: number) => {
        clock = start + at
        const answers = []
        for (let i = 0; i < count; i++) {
          const res = await list(app, headers)
          const { r, t } = limitItem(res, 'token')!
          if (res.statusCode === 429) assert.equal(res.headers['retry-after'], String(t), `Retry-After at ${at} ms`)
          answers.push(`${res.statusCode} r=${r} t=${t}`)
        }
        return answers
      }
      const burst = ['200 r=3 t=2', '200 r=2 t=2', '200 r=1 t=2', '200 r=0 t=2', '429 r=0 t=2']
      assert.deepEqual(await answersAt(0, 5), burst, 'the whole budget at once, then 2 s until one comes back')
      assert.deepEqual(await answersAt(1999, 1), ['429 r=0 t=1'], 'not a millisecond early')
      assert.deepEqual(await answersAt(2000, 2), ['200 r=0 t=2', '429 r=0 t=2'], 'one back at 2 s, no more')
      // Refilled at 4 s, not yet at 6 s: one request, and the RateLimit field says the next comes in a second.
      assert.deepEqual(await answersAt(5999, 2), ['200 r=0 t=1', '429 r=0 t=1'])
      assert.deepEqual(await answersAt(6000, 2), ['200 r=0 t=2', '429 r=0 t=2'])
      // The end of the first 8 s brings back one request, not the whole budget as a fixed window would.
      assert.deepEqual(await answersAt(8000, 2), ['200 r=0 t=2', '429 r=0 t=2'])
      // A long rest refills the budget to its size and no further.
      assert.deepEqual(await answersAt(68_000, 5), burst)
    })

    test('counts 4xx answers to a valid token too (missing scope, invalid body), with RateLimit headers', async () => {
      const { app, storage } = await appWith(
        {
          perToken: { max: 2, windowMs: 60_000 },
          authFailures: { max: 0, windowMs: 1000 },
        },
        { backend },
      )
      const json = { 'content-type': 'application/json' }
      const readOnly = bearer((await issueToken(storage, { accountName: 'a', scopes: ['plants:read'] })).secret)
      const forbidden = await app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...readOnly, ...json },
        payload: '{}',
      })
      assert.equal(forbidden.statusCode, 403)
      assert.equal(limitItem(forbidden, 'token')?.r, 1)
      const writer = bearer((await issueToken(storage, { accountName: 'b' })).secret)
      const invalid = await app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...writer, ...json },
        payload: '{"id": "x"}',
      })
      assert.equal(invalid.statusCode, 400)
      assert.equal(limitItem(invalid, 'token')?.r, 1)
    })

    test('sends the RateLimit fields on answers after authentication (404, 413, 415), none on the throttle’s 429', async () => {
      const { app, storage } = await appWith(
        { perToken: { max: 100, windowMs: 60_000 }, authFailures: { max: 1, windowMs: 60_000 } },
        { backend },
      )
      const headers = bearer((await issueToken(storage, { accountName: 'a' })).secret)
      const post = (payload: string, type = 'application/json') =>
        app.inject({ method: 'POST', url: '/plants', headers: { ...headers, 'content-type': type }, payload })
      const answers = [
        await app.inject({ method: 'GET', url: '/plants/999', headers }),
        await post(`{"id":1,"name":"${'x'.repeat(70_000)}"}`),
        await post('id=1', 'text/plain'),
      ]
      assert.deepEqual(
        answers.map((res) => [res.statusCode, limitItem(res, 'token')?.r]),
        [
          [404, 99],
          [413, 98],
          [415, 97],
        ],
      )
      // The failed-authentication limit answers before any token is read: a valid one included, no budget to tell.
      const remoteAddress = '127.0.0.7'
      const guess = await app.inject({ method: 'GET', url: '/plants', headers: bearer('pst_wrong'), remoteAddress })
      assert.equal(guess.statusCode, 401)
      const throttled = await app.inject({ method: 'GET', url: '/plants', headers, remoteAddress })
      assert.equal(throttled.statusCode, 429)
      assert.deepEqual([throttled.headers.ratelimit, throttled.headers['ratelimit-policy']], [undefined, undefined])
      assert.equal(guess.headers.ratelimit, undefined, 'nor a 401')
    })

    test('puts no RateLimit headers on public routes', async () => {
      const { app } = await appWith(
        { perToken: { max: 3, windowMs: 1000 }, authFailures: { max: 0, windowMs: 1000 } },
        { backend },
      )
      const res = await app.inject({ method: 'GET', url: '/healthz' })
      assert.equal(res.headers.ratelimit, undefined)
      assert.equal(res.headers['ratelimit-policy'], undefined)
    })
  })

describe('failed-authentication limit per client address', () => {
  test('answers 429 once an address has failed too often, even with a valid token, and not for a missing token', async () => {
    const { app, storage } = await appWith({
      perToken: { max: 0, windowMs: 1000 },
      authFailures: { max: 3, windowMs: 60_000 },
    })
    const good = bearer((await issueToken(storage, { accountName: 'a' })).secret)
    for (let i = 0; i < 5; i++) assert.equal((await app.inject({ method: 'GET', url: '/plants' })).statusCode, 401)
    assert.equal((await list(app, good)).statusCode, 200, 'requests without a token are not guesses')
    for (let i = 0; i < 3; i++) assert.equal((await list(app, bearer(`pst_wrong${i}`))).statusCode, 401)
    const limited = await list(app, bearer('pst_wrong4'))
    assert.equal(limited.statusCode, 429)
    assert.equal(limited.json().error, 42901)
    assert.ok(Number(limited.headers['retry-after']) >= 1)
    const blocked = await list(app, good)
    assert.equal(blocked.statusCode, 429, 'a right guess does not get through either')
    const wait = Number(blocked.headers['retry-after'])
    assert.ok(wait >= 1 && wait <= 60, `Retry-After ${wait} is the rest of the window`)
  })
})

test(
  'runs the shared-limit tests against Redis too',
  {
    skip:
      REDIS_URL === undefined && !redisRequired
        ? 'Redis half skipped: set PLANTSTORE_TEST_REDIS_URL=redis://127.0.0.1:6379 to run it'
        : false,
  },
  () => {
    assert.ok(REDIS_URL !== undefined, 'PLANTSTORE_TEST_REQUIRE_REDIS=1 but PLANTSTORE_TEST_REDIS_URL is not set')
  },
)

if (REDIS_URL !== undefined)
  describe('rate limits shared through Redis', () => {
    test('two instances share one token budget and one failure count', async () => {
      const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 1 })
      cleanups.push(() => redis.quit())
      const namespace = `plantstore-test:${randomUUID()}:`
      const limits = {
        perToken: { max: 4, windowMs: 60_000 },
        authFailures: { max: 2, windowMs: 60_000 },
        redis,
        namespace,
      }
      const a = await appWith(limits)
      const b = await appWith(limits, { storage: a.storage })
      const headers = bearer((await issueToken(a.storage, { accountName: 'a' })).secret)
      for (const app of [a.app, b.app, a.app, b.app]) assert.equal((await list(app, headers)).statusCode, 200)
      assert.equal((await list(a.app, headers)).statusCode, 429)
      assert.equal((await list(b.app, headers)).statusCode, 429)
      assert.equal((await list(a.app, bearer('pst_x1'))).statusCode, 401)
      assert.equal((await list(b.app, bearer('pst_x2'))).statusCode, 401)
      assert.equal((await list(a.app, bearer('pst_x3'))).statusCode, 429)
    })
  })

if (REDIS_URL !== undefined)
  describe('per-token and per-account limits shared through Redis', () => {
    test('a token refused by its own limit on two instances does not spend its account’s budget', async () => {
      const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 1 })
      cleanups.push(() => redis.quit())
      const limits = { ...FLOOD_LIMITS, redis, namespace: `plantstore-test:${randomUUID()}:` }
      const a = await appWith(limits)
      const b = await appWith(limits, { storage: a.storage })
      await floodOneToken([a.app, b.app], a.storage)
    })
  })

if (REDIS_URL !== undefined)
  describe('wrong /metrics tokens shared through Redis', () => {
    test('a wrong /metrics token on one instance counts toward the failure limit on another', async () => {
      const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 1 })
      cleanups.push(() => redis.quit())
      const limits = {
        perToken: { max: 0, windowMs: 60_000 },
        authFailures: { max: 2, windowMs: 60_000 },
        redis,
        namespace: `plantstore-test:${randomUUID()}:`,
      }
      const metricsToken = 'metrics-token-0123456789'
      const a = await appWith(limits, { metricsToken })
      const b = await appWith(limits, { storage: a.storage, metricsToken })
      const scrape = (app: FastifyInstance, token: string) =>
        app.inject({ method: 'GET', url: '/metrics', headers: bearer(token) })
      assert.equal((await scrape(a.app, 'wrong-metrics-token-1')).statusCode, 401)
      assert.equal((await list(b.app, bearer('pst_x1'))).statusCode, 401)
      assert.equal((await scrape(a.app, 'wrong-metrics-token-2')).statusCode, 429)
      assert.equal((await scrape(b.app, metricsToken)).statusCode, 429)
    })
  })

describe('failed-authentication limit behind a reverse proxy', () => {
  test('counts per client address from X-Forwarded-For when the proxy is trusted', async () => {
    const fresh = await freshStorage(backends[0]!)
    cleanups.push(fresh.dispose)
    const limits = { perToken: { max: 0, windowMs: 1000 }, authFailures: { max: 1, windowMs: 60_000 } }
    const app = checkEveryResponse(
      await buildApp({ storage: fresh.storage, rateLimit: limits, trustProxy: '127.0.0.1' }),
    )
    cleanups.push(() => app.close())
    const from = (client: string) => ({ ...bearer('pst_wrong'), 'x-forwarded-for': client })
    assert.equal((await list(app, from('203.0.113.1'))).statusCode, 401)
    assert.equal((await list(app, from('203.0.113.1'))).statusCode, 429)
    assert.equal((await list(app, from('203.0.113.2'))).statusCode, 401, 'another client behind the same proxy')
    assert.equal((await list(app, from('2001:db8:1:2::1'))).statusCode, 401)
    assert.equal((await list(app, from('2001:db8:1:2::ffff'))).statusCode, 429, 'one IPv6 /64 is one client')
  })
})

describe('rate limits with Redis gone', () => {
  /** An app whose limits count in a Redis that cannot be reached, at `perToken` requests per token. */
  async function appWithRedisGone(perToken: number) {
    const redis = new Redis('redis://127.0.0.1:1', {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      lazyConnect: true,
    })
    redis.on('error', () => {})
    cleanups.push(async () => redis.disconnect())
    const { app, storage } = await appWith({
      perToken: { max: perToken, windowMs: 60_000 },
      authFailures: { max: 1, windowMs: 60_000 },
      redis,
    })
    return { app, headers: bearer((await issueToken(storage, { accountName: 'a' })).secret) }
  }

  test('keeps serving, unlimited, when Redis cannot be reached', async () => {
    const { app, headers } = await appWithRedisGone(1)
    for (let i = 0; i < 3; i++) assert.equal((await list(app, headers)).statusCode, 200)
    for (let i = 0; i < 3; i++) assert.equal((await list(app, bearer('pst_bad'))).statusCode, 401)
  })

  test('says the whole budget is left while Redis cannot be reached', async () => {
    const { app, headers } = await appWithRedisGone(5)
    const res = await list(app, headers)
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['ratelimit-policy'], '"token";q=5;w=60')
    assert.equal(res.headers.ratelimit, '"token";r=5')
  })
})
