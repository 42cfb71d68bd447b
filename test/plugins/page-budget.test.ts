import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import Fastify, { type FastifyRequest } from 'fastify'
import { declareCaller } from '../../src/auth/caller.js'
import { registerErrorHandler } from '../../src/plugins/error-handler.js'
import {
  MOST_WAIT_MS,
  MOST_WAITING_PER_ACCOUNT,
  PageBudget,
  type PageBudgetBound,
} from '../../src/plugins/page-budget.js'
import { pageBudgetHook } from '../../src/plugins/page-budget-hook.js'
import { PageShares } from '../../src/plugins/page-shares.js'
import { parsed, rawExchange } from '../helpers/raw-http.js'
import { bearer, buildTestApp, expectServerError, type TestApp } from '../helpers/app.js'
import { testOnce } from '../helpers/once.js'

describe('PageBudget', () => {
  test("refuses an account's rows past its bound, naming the account's bound, and takes nothing then", () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 5000 })
    assert.equal(budget.take(1, 600), undefined)
    assert.equal(budget.take(1, 600), 'account')
    assert.equal(budget.inProgress(1), 600)
    assert.equal(budget.take(1, 400), undefined, 'up to the bound exactly')
    assert.equal(budget.take(2, 1000), undefined, "another account's rows are its own")
  })

  test('refuses past the process bound when the accounts together hold it, each within its own', () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 1500 })
    assert.equal(budget.take(1, 1000), undefined)
    assert.equal(budget.take(2, 600), 'process')
    assert.equal(budget.take(2, 500), undefined)
    assert.equal(budget.inProgress(), 1500)
  })

  test('holds rows until they are given back', () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 1500 })
    budget.take(1, 1000)
    budget.take(2, 500)
    assert.equal(budget.take(1, 1000), 'account', 'rows still count until they are given back')
    budget.giveBack(1, 1000)
    assert.equal(budget.inProgress(1), 0)
    assert.equal(budget.inProgress(), 500)
    assert.equal(budget.take(1, 1000), undefined)
  })

  test('lets every waiting page try again when rows are given back, in the order they came, and forgets a cancelled one', () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 5000 })
    budget.take(1, 1000)
    const tried: string[] = []
    budget.wait(1, () => tried.push('first'))
    const cancelled = budget.wait(1, () => tried.push('cancelled'))!
    budget.wait(2, () => tried.push('other account'))
    budget.cancel(cancelled)
    assert.equal(budget.waiting(1), 1)
    assert.deepEqual(tried, [], 'no rows are back yet')
    budget.giveBack(1, 1000)
    assert.deepEqual(tried, ['first', 'other account'])
    assert.equal(budget.waiting(), 0, 'a page that tried again waits again only if it asks to')
  })

  test(`queues at most ${MOST_WAITING_PER_ACCOUNT} waiting pages of one account, each account on its own`, () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 5000 })
    for (let i = 0; i < MOST_WAITING_PER_ACCOUNT; i++) assert.ok(budget.wait(1, () => {}))
    assert.equal(
      budget.wait(1, () => {}),
      undefined,
    )
    assert.ok(budget.wait(2, () => {}))
  })
})

/**
 * A server with the page budget's hook on `GET /page`: the caller's account is `?account=`, the page's rows `?rows=`,
 * and the handler answers only once `finish()` is called (so a page stays in progress as long as a test needs).
 */
async function server(
  limits: { perAccount: number; perProcess: number },
  {
    shares,
    maxWaitMs,
    onHandler,
  }: { shares?: PageShares; maxWaitMs?: number; onHandler?: (request: FastifyRequest) => void } = {},
) {
  const app = Fastify()
  declareCaller(app)
  registerErrorHandler(app)
  const budget = new PageBudget(limits, shares)
  const refused: PageBudgetBound[] = []
  let started = 0
  const waiting: Array<() => void> = []
  app.addHook('onRequest', (request, _reply, done) => {
    const { account } = request.query as { account: string }
    request.caller = { accountId: Number(account), accountName: account, tokenId: 't', scopes: [], expiresAt: null }
    done()
  })
  const hold = pageBudgetHook(
    budget,
    (request) => Number((request.query as { rows: string }).rows),
    (bound) => {
      refused.push(bound)
    },
    maxWaitMs,
  )
  app.get('/page', { preHandler: hold }, async (request) => {
    onHandler?.(request)
    started++
    await new Promise<void>((resolve) => waiting.push(resolve))
    return { page: true }
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return {
    app,
    budget,
    refused,
    started: () => started,
    /** Lets every handler waiting so far answer. */
    finish: () => waiting.splice(0).forEach((resolve) => resolve()),
    url: (account: number, rows: number) =>
      `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/page?account=${account}&rows=${rows}`,
    port: () => (app.server.address() as AddressInfo).port,
  }
}

/** Resolves once `check` holds, polling each turn; fails after 10 s, which only a hang takes (it holds in ms). */
async function until(check: () => boolean, what: string): Promise<void> {
  for (const started = Date.now(); !check(); await sleep(5)) {
    if (Date.now() - started > 10_000) assert.fail(`${what} within 10 s`)
  }
}

describe('the page budget on a route', () => {
  test('answers 429 (42904) with Retry-After and Connection: close when a page would take its account past its bound, while another account is served', async () => {
    const s = await server({ perAccount: 1000, perProcess: 5000 })
    try {
      const first = fetch(s.url(1, 600))
      await until(() => s.started() === 1, 'the first page in progress')
      const res = await fetch(s.url(1, 600))
      assert.equal(res.status, 429)
      assert.equal(res.headers.get('retry-after'), '1')
      assert.equal(res.headers.get('connection'), 'close')
      const body = (await res.json()) as { error: number; message: string }
      assert.equal(body.error, 42904)
      assert.match(body.message, /a page of 600 rows would take the account's pages in progress past 1000 rows/)
      const other = fetch(s.url(2, 600))
      await until(() => s.started() === 2, "another account's page in progress")
      s.finish()
      assert.equal((await first).status, 200)
      assert.equal((await other).status, 200)
      assert.deepEqual(s.refused, ['account'])
    } finally {
      s.finish()
      await s.app.close()
    }
  })

  /**
   * A server whose event loop is always busy (on a clock the test moves) where account 1's page took 600 ms of the
   * loop before its handler's first wait (`?cost=`, the clock moved by the handler) and account 2's none: past a
   * 100 ms census, both count, and account 1 is over its share of the window (250 ms).
   */
  async function overShare(maxWaitMs?: number) {
    const clock = { at: 0 }
    const shares = new PageShares(0.5, { now: () => clock.at, utilization: () => 1 })
    const onHandler = (request: FastifyRequest) => (clock.at += Number((request.query as { cost?: string }).cost ?? 0))
    const s = await server({ perAccount: 1000, perProcess: 5000 }, { shares, maxWaitMs, onHandler })
    const first = fetch(`${s.url(1, 10)}&cost=600`)
    const second = fetch(s.url(2, 10))
    await until(() => s.started() === 2, 'both pages in progress')
    s.finish()
    assert.equal((await first).status, 200)
    assert.equal((await second).status, 200)
    clock.at += 100
    return { s, clock }
  }

  test(
    "answers 429 (42905) with Retry-After and Connection: close when an account's pages took more than its share of a busy event loop, while another account is served",
    { timeout: 20_000 },
    async () => {
      const { s } = await overShare(200)
      try {
        const res = await fetch(s.url(1, 10))
        assert.equal(res.status, 429)
        assert.equal(res.headers.get('retry-after'), '1')
        assert.equal(res.headers.get('connection'), 'close')
        const body = (await res.json()) as { error: number; message: string }
        assert.deepEqual(body, {
          error: 42905,
          message:
            "the account's pages took more than its share of this busy instance's time in the last second; retry in 1 second",
        })
        const other = fetch(s.url(2, 10))
        await until(() => s.started() === 3, "account 2's next page in progress")
        s.finish()
        assert.equal((await other).status, 200)
        assert.deepEqual(s.refused, ['share'])
      } finally {
        s.finish()
        await s.app.close()
      }
    },
  )

  test(
    "starts a page kept out by its account's share once the account's time has decayed to it",
    { timeout: 20_000 },
    async () => {
      const { s, clock } = await overShare()
      try {
        const page = fetch(s.url(1, 10))
        await until(() => s.budget.waiting(1) === 1, 'the page waiting for its share')
        assert.equal(s.started(), 2)
        // 543 ms decays to 199 ms in a second: under the share of 250.
        clock.at += 1000
        await until(() => s.started() === 3, 'the page started')
        s.finish()
        assert.equal((await page).status, 200)
        assert.deepEqual(s.refused, [])
      } finally {
        s.finish()
        await s.app.close()
      }
    },
  )

  test('answers 503 (50304) with Retry-After when the accounts together would pass the process bound', async () => {
    const s = await server({ perAccount: 1000, perProcess: 1000 })
    try {
      const first = fetch(s.url(1, 600))
      await until(() => s.started() === 1, 'the first page in progress')
      const res = await fetch(s.url(2, 600))
      assert.equal(res.status, 503)
      assert.equal(res.headers.get('retry-after'), '1')
      const body = (await res.json()) as { error: number; message: string }
      assert.deepEqual(body, {
        error: 50304,
        message: 'this instance has 1000 rows of pages in progress; retry in 1 second or on another instance',
      })
      s.finish()
      assert.equal((await first).status, 200)
      assert.deepEqual(s.refused, ['process'])
    } finally {
      s.finish()
      await s.app.close()
    }
  })

  test('serves pages one account asks for in parallel, each waiting for the rows of those before it', async () => {
    const s = await server({ perAccount: 1000, perProcess: 5000 })
    try {
      // Statuses, 0 for a request that failed: none left to reject after the test, whatever happens.
      const statuses = [1000, 1000, 600].map((rows) =>
        fetch(s.url(1, rows)).then(
          (res) => res.status,
          () => 0,
        ),
      )
      for (let made = 1; made <= 3; made++) {
        // The three arrive in any order; one page is made at a time, the others wait.
        await until(() => s.started() === made && s.budget.waiting(1) === 3 - made, `page ${made} in progress`)
        s.finish()
      }
      assert.deepEqual(await Promise.all(statuses), [200, 200, 200])
      assert.deepEqual(s.refused, [])
    } finally {
      s.finish()
      await s.app.close()
    }
  })

  test(`refuses a page still kept out after ${MOST_WAIT_MS} ms of waiting`, async () => {
    const s = await server({ perAccount: 1000, perProcess: 5000 })
    try {
      const held = fetch(s.url(1, 1000))
      await until(() => s.started() === 1, 'the page in progress')
      const started = Date.now()
      const res = await fetch(s.url(1, 1000))
      assert.equal(res.status, 429)
      assert.ok(Date.now() - started >= MOST_WAIT_MS - 50, `refused after ${Date.now() - started} ms`)
      assert.equal(s.budget.waiting(), 0)
      s.finish()
      assert.equal((await held).status, 200)
    } finally {
      s.finish()
      await s.app.close()
    }
  })

  test('gives the rows back once the answer is handed to the socket, on the turn after', async () => {
    const s = await server({ perAccount: 1000, perProcess: 5000 })
    try {
      const first = fetch(s.url(1, 1000))
      await until(() => s.started() === 1, 'the page in progress')
      assert.equal(s.budget.inProgress(1), 1000)
      s.finish()
      assert.equal((await first).status, 200)
      await until(() => s.budget.inProgress() === 0, 'the rows given back')
      const second = fetch(s.url(1, 1000))
      await until(() => s.started() === 2, 'the next page of the account in progress')
      s.finish()
      assert.equal((await second).status, 200)
    } finally {
      s.finish()
      await s.app.close()
    }
  })

  test('gives the rows back when the client goes away before its page is answered', async () => {
    const s = await server({ perAccount: 1000, perProcess: 5000 })
    try {
      const request = `GET /page?account=1&rows=1000 HTTP/1.1\r\nHost: x\r\n\r\n`
      const gone = rawExchange(s.port(), [request], { closeAfterMs: 100 })
      await until(() => s.started() === 1, 'the page in progress')
      assert.equal(s.budget.inProgress(1), 1000)
      await gone
      // The handler has not answered: only the connection's close can give the rows back.
      await until(() => s.budget.inProgress() === 0, 'the rows given back')
      await nextTurn()
      const next = fetch(s.url(1, 1000))
      await until(() => s.started() === 2, "the account's next page in progress")
      s.finish()
      assert.equal((await next).status, 200)
    } finally {
      s.finish()
      await s.app.close()
    }
  })

  test('drops the requests pipelined behind a refusal with the connection, making none of them', async () => {
    const s = await server({ perAccount: 1000, perProcess: 5000 })
    try {
      const held = fetch(s.url(1, 1000))
      await until(() => s.started() === 1, 'the page in progress')
      const page = `GET /page?account=1&rows=1000 HTTP/1.1\r\nHost: x\r\n\r\n`
      const { text } = await rawExchange(s.port(), [page.repeat(4)], { closeAfterMs: 3000 })
      assert.equal(parsed(text).status, 429)
      assert.equal([...text.matchAll(/HTTP\/1\.1 /g)].length, 1, 'one answer, then the close')
      assert.equal(s.started(), 1, 'no page made for the requests behind it')
      s.finish()
      assert.equal((await held).status, 200)
    } finally {
      s.finish()
      await s.app.close()
    }
  })
})

describe('GET /plants with a page budget', () => {
  let t: TestApp
  let token: string
  before(async () => {
    t = await buildTestApp(undefined, 2000, undefined, { pageBudget: { perAccount: 10, perProcess: 100 } })
    token = await t.token()
  })
  after(() => t.close())

  // The counter test reads the refusal this one provokes: it runs once, here or first in the counter's.
  const refusal = testOnce(
    "refuses a page that would pass the account's bound with 429 (42904), as the OpenAPI document says",
    async () => {
      const res = await t.app.inject({ method: 'GET', url: '/plants?limit=11', headers: bearer(token) })
      assert.equal(res.statusCode, 429)
      assert.equal(res.headers['retry-after'], '1')
      assert.equal((res.json() as { error: number }).error, 42904)
      assert.equal(
        (await t.app.inject({ method: 'GET', url: '/plants?limit=10', headers: bearer(token) })).statusCode,
        200,
      )
    },
  )

  test('counts refusals in plantstore_page_budget_refused_total by bound', async () => {
    await refusal()
    // The page answered above gives its rows back on the turn after its answer.
    await nextTurn()
    const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body
    assert.match(text, /^plantstore_page_budget_refused_total\{bound="account"\} 1$/m)
    assert.match(text, /^plantstore_page_rows_in_progress 0$/m)
  })
})

describe('GET /plants past the process bound', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp(undefined, 2000, undefined, { pageBudget: { perAccount: 100, perProcess: 10 } })
  })
  after(() => t.close())

  test('refuses with 503 (50304), as the OpenAPI document says', async () => {
    const headers = bearer(await t.token())
    const res = await expectServerError(503, () => t.app.inject({ method: 'GET', url: '/plants?limit=11', headers }))
    assert.equal(res.statusCode, 503)
    assert.equal(res.headers['retry-after'], '1')
    assert.equal((res.json() as { error: number }).error, 50304)
  })
})

describe('GET /plants under the default page budget', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(() => t.close())

  test("serves a page asked for right after the account's last, in the same turn, by waiting for the turn after", async () => {
    const headers = bearer(await t.token())
    // inject runs the second request as soon as the first is answered, before the event loop turns: the first
    // page's rows still count then, and only waiting a turn lets the second in.
    const first = await t.app.inject({ method: 'GET', url: '/plants?limit=1000', headers })
    const second = await t.app.inject({ method: 'GET', url: '/plants?limit=1000', headers })
    assert.deepEqual([first.statusCode, second.statusCode], [200, 200])
  })
})
