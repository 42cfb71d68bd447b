import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { limitField, policyField } from '../../../src/limits/ratelimit-fields.js'
import type { Rate } from '../../../src/limits/rate.js'
import { memoryRateStore } from '../../../src/limits/rate-store.js'
import { retryAfter } from '../../../src/limits/too-many.js'
import { Pacer } from '../src/pacer.js'
import { readOnly, retryingFetch } from '../src/retry.js'

// The simulated clock: Date and setTimeout mocked, so a run of seconds takes a fraction of one and goes the same way
// every time.
const later = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const settled = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * A service counting each request with its own rate limiter (the store, the fields, Retry-After) for a token, its
 * answers on a loaded machine: a request reaches the limiter 1 to 13 ms after it is sent, and every half second the
 * server stalls for 100 ms and then counts all that came meanwhile at once; the answer takes 1 to 5 ms more.
 */
function limitedService(rate: Rate) {
  const store = memoryRateStore(rate, 10, () => Date.now())
  const policies = policyField([{ policy: 'token', rate }])
  const service = {
    sent: 0,
    refused: 0,
    /** Requests out at once, at most. */
    most: 0,
    out: 0,
    /** Takes a unit from the token's budget outside the client, as another client with the token does. */
    spend: () => store.take('token'),
    fetch: async (): Promise<Response> => {
      const seq = service.sent++
      service.most = Math.max(service.most, ++service.out)
      await later(1 + ((seq * 7919) % 13))
      const stalled = Date.now() % 500
      if (stalled < 100) await later(100 - stalled)
      const budget = store.take('token')
      const headers = new Headers({ ratelimit: limitField([{ policy: 'token', rate, budget }]) })
      headers.set('ratelimit-policy', policies)
      if (!budget.allowed) {
        service.refused++
        headers.set('retry-after', retryAfter(budget.nextMs)['retry-after']!)
      }
      await later(1 + (seq % 5))
      service.out--
      return new Response(null, { status: budget.allowed ? 200 : 429, headers })
    },
  }
  return service
}

/** Runs `work` on the simulated clock, a millisecond at a time, until it is done; its result. */
async function onSimulatedClock<T>(t: TestContext, work: Promise<T>): Promise<T> {
  let done = false
  const finished = work.finally(() => (done = true))
  while (!done) {
    t.mock.timers.tick(1)
    await settled()
  }
  return finished
}

const request = () => new Request('http://127.0.0.1:1/plants', { method: 'POST' })

describe('pacing by the RateLimit fields', () => {
  test('1,500 requests at once go no faster than the budget allows: none refused, and at its pace', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
    const rate = { max: 250, windowMs: 1000 }
    const service = limitedService(rate)
    const fetch = retryingFetch(service.fetch, {}, readOnly, new Pacer(() => Date.now()))
    const answers = await onSimulatedClock(t, Promise.all(Array.from({ length: 1500 }, () => fetch(request()))))
    assert.equal(service.refused, 0, 'no 429')
    assert.deepEqual(new Set(answers.map((answer) => answer.status)), new Set([200]))
    // The fastest the limit allows: the burst at once, the rest at the refill rate.
    const fastest = ((1500 - rate.max) * rate.windowMs) / rate.max
    assert.ok(Date.now() < fastest * 1.25, `1,500 in ${Date.now()} ms; the limit allows ${fastest}`)
    assert.ok(service.most <= rate.max, `${service.most} out at once: never more than the budget holds`)
  })

  test('a 429 all the same (another client spent the budget) is sent again after its Retry-After', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
    const rate = { max: 20, windowMs: 1000 }
    const service = limitedService(rate)
    const fetch = retryingFetch(service.fetch, {}, readOnly, new Pacer(() => Date.now()))
    await onSimulatedClock(t, fetch(request()))
    while (service.spend().allowed);
    const answers = await onSimulatedClock(t, Promise.all(Array.from({ length: 40 }, () => fetch(request()))))
    assert.ok(service.refused > 0, 'refused while the other client had the budget')
    assert.deepEqual(new Set(answers.map((answer) => answer.status)), new Set([200]), 'each sent again, and made')
  })

  test('a request given up while it waits for the budget leaves the queue; the others go on', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
    const service = limitedService({ max: 2, windowMs: 1000 })
    const fetch = retryingFetch(service.fetch, {}, readOnly, new Pacer(() => Date.now()))
    await onSimulatedClock(t, fetch(request()))
    const controller = new AbortController()
    const signal = controller.signal
    const given = new Request('http://127.0.0.1:1/plants', { method: 'POST', signal })
    const waiting = [fetch(request()), fetch(given), fetch(request())]
    const before = service.sent
    controller.abort(new Error('given up'))
    await assert.rejects(waiting[1]!, /given up/)
    await onSimulatedClock(t, Promise.all([waiting[0], waiting[2]]))
    assert.equal(service.sent, before + 2, 'the one given up was never sent')
    assert.equal(service.refused, 0)
  })

  test('paces nothing when the service sends no RateLimit: all go once the first is answered', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
    let [out, most] = [0, 0]
    const open = async () => {
      most = Math.max(most, ++out)
      await later(5)
      out--
      return new Response(null, { status: 200 })
    }
    const fetch = retryingFetch(open, {}, readOnly, new Pacer(() => Date.now()))
    await onSimulatedClock(t, fetch(request()))
    await onSimulatedClock(t, Promise.all(Array.from({ length: 50 }, () => fetch(request()))))
    assert.equal(most, 50)
  })

  test('with pacing: false, sends every request at once', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
    const service = limitedService({ max: 20, windowMs: 1000 })
    const fetch = retryingFetch(service.fetch, { pacing: false, retries: 0 })
    const answers = await onSimulatedClock(t, Promise.all(Array.from({ length: 50 }, () => fetch(request()))))
    assert.equal(answers.filter((answer) => answer.status === 429).length, 30)
  })
})
