import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { nextCursor } from '../src/link.js'
import { fieldItems, policyReports } from '../src/ratelimit-fields.js'
import { retryAfterMs, retryingFetch } from '../src/retry.js'

describe('Retry-After', () => {
  test('reads seconds and HTTP dates, and nothing else', () => {
    assert.equal(retryAfterMs('1'), 1000)
    assert.equal(retryAfterMs(' 30 '), 30_000)
    const now = Date.parse('2026-11-25T10:00:00Z')
    assert.equal(retryAfterMs('Wed, 25 Nov 2026 10:00:05 GMT', now), 5000)
    assert.equal(retryAfterMs('Wed, 25 Nov 2026 09:00:00 GMT', now), 0)
    assert.equal(retryAfterMs(null), undefined)
    assert.equal(retryAfterMs('soon'), undefined)
    assert.equal(retryAfterMs('-1'), undefined)
    assert.equal(retryAfterMs('1.5'), undefined)
  })
})

describe('the RateLimit fields', () => {
  test("read each policy's whole-number parameters, and ignore what they cannot read", () => {
    assert.deepEqual(
      fieldItems('"token";r=0;t=3, "account";r=12;t=1;pk=:cHsx:'),
      new Map([
        [
          'token',
          new Map([
            ['r', 0],
            ['t', 3],
          ]),
        ],
        [
          'account',
          new Map([
            ['r', 12],
            ['t', 1],
          ]),
        ],
      ]),
    )
    assert.deepEqual(fieldItems(null), new Map())
    assert.deepEqual([...fieldItems('token;r=0;t=3, "x";r=-1;t=1.5, "y" r=1').keys()], ['x'], 'names are strings')
    assert.deepEqual(fieldItems('"x";r=-1;t=1.5').get('x'), new Map(), 'not whole numbers')
  })

  test('give each policy of RateLimit with its quota and window from RateLimit-Policy when that names it', () => {
    const headers = new Headers({
      ratelimit: '"token";r=98;t=1, "account";r=7, "other";t=1',
      'ratelimit-policy': '"token";q=100;w=1, "account";q=0;w=60',
    })
    assert.deepEqual(policyReports(headers), [
      { name: 'token', remaining: 98, resetSeconds: 1, quota: 100, windowSeconds: 1 },
      { name: 'account', remaining: 7, resetSeconds: undefined, quota: undefined, windowSeconds: undefined },
    ])
  })
})

describe('retryingFetch', () => {
  const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers })
  const request = (method = 'GET') => new Request('http://127.0.0.1:1/plants', { method })

  test('gives up when the wait would end after the time limit, and answers the 503', async () => {
    let calls = 0
    const fetch = retryingFetch(async () => (calls++, answer(503, { 'retry-after': '60' })), { retryTimeLimitMs: 1000 })
    assert.equal((await fetch(request())).status, 503)
    assert.equal(calls, 1)
  })

  test('sends a 503-refused POST again, body and all, and answers what the retry got', async () => {
    const bodies: string[] = []
    const answers = [answer(503, { 'retry-after': '0' }), answer(200)]
    const fetch = retryingFetch(async (sent) => (bodies.push(await sent.text()), answers.shift()!))
    const post = new Request('http://127.0.0.1:1/plants', { method: 'POST', body: '{"id":1,"name":"Fern"}' })
    assert.equal((await fetch(post)).status, 200)
    assert.deepEqual(bodies, ['{"id":1,"name":"Fern"}', '{"id":1,"name":"Fern"}'])
  })

  test('stops waiting when the request is aborted', async () => {
    const controller = new AbortController()
    const fetch = retryingFetch(async () => answer(429, { 'retry-after': '20' }))
    const sent = fetch(new Request('http://127.0.0.1:1/plants', { signal: controller.signal }))
    controller.abort(new Error('given up'))
    await assert.rejects(sent, /given up/)
  })

  test("waits before the next request as long as the last answer's RateLimit field says a budget is spent", async () => {
    const sent: number[] = []
    const fetch = retryingFetch(async () => {
      sent.push(Date.now())
      return answer(200, { ratelimit: sent.length === 1 ? '"token";r=0;t=1' : '"token";r=9;t=1' })
    })
    await fetch(request())
    await fetch(request())
    await fetch(request())
    assert.ok(sent[1]! - sent[0]! >= 990, `paused ${sent[1]! - sent[0]!} ms after r=0`)
    assert.ok(sent[2]! - sent[1]! < 500, 'no pause while budget is left')
  })

  test('waits out a 409 that has Retry-After (a key whose first request runs), not a 409 without', async () => {
    const answers = [answer(409, { 'retry-after': '0' }), answer(200)]
    let calls = 0
    const running = retryingFetch(async () => (calls++, answers.shift()!))
    assert.equal((await running(request('POST'))).status, 200)
    assert.equal(calls, 2)
    calls = 0
    const conflict = retryingFetch(async () => (calls++, answer(409)))
    assert.equal((await conflict(request('POST'))).status, 409)
    assert.equal(calls, 1)
  })

  test('makes at most `retries` further attempts', async () => {
    let calls = 0
    const fetch = retryingFetch(async () => (calls++, answer(429, { 'retry-after': '0' })), { retries: 2 })
    assert.equal((await fetch(request())).status, 429)
    assert.equal(calls, 3)
  })

  test('repeats after a network error only what `repeatable` allows (by default reads)', async () => {
    let calls = 0
    const failing = async () => {
      calls++
      throw new TypeError('fetch failed')
    }
    await assert.rejects(retryingFetch(failing)(request('DELETE')), TypeError)
    assert.equal(calls, 1)
    calls = 0
    await assert.rejects(retryingFetch(failing, { retries: 1 })(request('GET')), TypeError)
    assert.equal(calls, 2)
  })
})

describe('the Link header', () => {
  test('gives the cursor of rel="next", resolved against the request', () => {
    const link = '</plants?limit=1&cursor=cDE6MQ&fields=id%2Cname%2Ctag>; rel="next"'
    assert.equal(nextCursor(link, 'http://127.0.0.1:8080/plants?limit=1'), 'cDE6MQ')
    assert.equal(nextCursor('<https://x.test/a?cursor=zz>; rel="prev", </p?cursor=yy>; rel=next', 'http://h/'), 'yy')
    assert.equal(nextCursor(null, 'http://h/'), undefined)
    assert.equal(nextCursor('</p?cursor=zz>; rel="prev"', 'http://h/'), undefined)
  })
})
