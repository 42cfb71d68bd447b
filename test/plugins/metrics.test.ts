import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { bearer, checkEveryResponse } from '../helpers/app.js'
import { backends, freshStorage } from '../helpers/backends.js'

const METRICS_TOKEN = 'metrics-token-0123456789'

/** The value of one sample line of the Prometheus text, or undefined when absent. */
function sample(text: string, name: string): number | undefined {
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `))
  return line === undefined ? undefined : Number(line.slice(name.length + 1))
}

for (const protect of [false, true]) {
  describe(`GET /metrics (${protect ? 'with' : 'without'} PLANTSTORE_METRICS_TOKEN)`, () => {
    let app: FastifyInstance
    let headers: { authorization: string }
    let dispose: () => Promise<void>
    before(async () => {
      const fresh = await freshStorage(backends[0]!)
      dispose = fresh.dispose
      headers = bearer((await issueToken(fresh.storage, { accountName: 'alice' })).secret)
      app = checkEveryResponse(
        await buildApp({ storage: fresh.storage, ...(protect && { metricsToken: METRICS_TOKEN }) }),
      )
    })
    after(async () => {
      await app.close()
      await dispose()
    })

    const scrape = async () => {
      const res = await app.inject({ method: 'GET', url: '/metrics', headers: protect ? bearer(METRICS_TOKEN) : {} })
      assert.equal(res.statusCode, 200, res.body)
      assert.match(String(res.headers['content-type']), /^text\/plain/)
      return res.body
    }

    test('counts a request that was made, by route, method and status, with its latency', async () => {
      await app.inject({ method: 'GET', url: '/plants?limit=5', headers })
      await app.inject({ method: 'GET', url: '/plants?limit=5', headers })
      await app.inject({ method: 'DELETE', url: '/plants/9', headers })
      const text = await scrape()
      assert.equal(sample(text, 'plantstore_http_requests_total{route="/plants",method="GET",status="200"}'), 2)
      assert.equal(sample(text, 'plantstore_http_requests_total{route="/plants/:id",method="DELETE",status="404"}'), 1)
      assert.equal(
        sample(text, 'plantstore_http_request_duration_seconds_count{route="/plants",method="GET",status="200"}'),
        2,
      )
    })

    test('counts authentication failures by reason', async () => {
      await app.inject({ method: 'GET', url: '/plants' })
      await app.inject({ method: 'GET', url: '/plants', headers: bearer('pst_unknown') })
      await app.inject({ method: 'GET', url: '/plants', headers: { authorization: 'Bearer a b' } })
      const text = await scrape()
      assert.equal(sample(text, 'plantstore_auth_failures_total{reason="missing"}'), 1)
      assert.equal(sample(text, 'plantstore_auth_failures_total{reason="unknown"}'), 1)
      assert.equal(sample(text, 'plantstore_auth_failures_total{reason="malformed"}'), 1)
    })

    test('times storage calls by operation and reports process metrics', async () => {
      await app.inject({ method: 'GET', url: '/plants', headers })
      const text = await scrape()
      assert.ok(
        (sample(text, 'plantstore_storage_call_duration_seconds_count{operation="listPlants",outcome="ok"}') ?? 0) >= 1,
      )
      assert.ok((sample(text, 'plantstore_process_resident_memory_bytes') ?? 0) > 0)
    })

    if (protect) {
      test('refuses a scrape without the metrics token, or with another token, with 401 in the Error shape', async () => {
        for (const h of [{}, headers, bearer(METRICS_TOKEN + 'x')]) {
          const res = await app.inject({ method: 'GET', url: '/metrics', headers: h })
          assert.equal(res.statusCode, 401)
          assert.equal(res.json().error, 40102)
          assert.match(String(res.headers['www-authenticate']), /^Bearer realm="plantstore-metrics"/)
        }
      })
    }
  })
}

describe('GET /metrics refusals count and are throttled like any failed authentication', () => {
  const cleanups: Array<() => Promise<unknown>> = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  async function metricsApp(authFailures: { max: number; windowMs: number }) {
    const fresh = await freshStorage(backends[0]!)
    cleanups.push(fresh.dispose)
    const rateLimit = { perToken: { max: 0, windowMs: 1000 }, authFailures }
    const app = checkEveryResponse(await buildApp({ storage: fresh.storage, metricsToken: METRICS_TOKEN, rateLimit }))
    cleanups.push(() => app.close())
    const headers = bearer((await issueToken(fresh.storage, { accountName: 'alice' })).secret)
    const scrape = (h: Record<string, string>) => app.inject({ method: 'GET', url: '/metrics', headers: h })
    return { app, headers, scrape }
  }

  test('counts a wrong metrics token as reason "metrics" and a missing one as "missing"', async () => {
    const { scrape } = await metricsApp({ max: 0, windowMs: 60_000 })
    assert.equal((await scrape(bearer('wrong-metrics-token-1'))).statusCode, 401)
    assert.equal((await scrape(bearer('wrong-metrics-token-2'))).statusCode, 401)
    assert.equal((await scrape({})).statusCode, 401)
    const text = (await scrape(bearer(METRICS_TOKEN))).body
    assert.equal(sample(text, 'plantstore_auth_failures_total{reason="metrics"}'), 2)
    assert.equal(sample(text, 'plantstore_auth_failures_total{reason="missing"}'), 1)
  })

  test('answers 429 with Retry-After once the address is over PLANTSTORE_AUTH_FAILURE_LIMIT, API failures included', async () => {
    const { app, headers, scrape } = await metricsApp({ max: 3, windowMs: 60_000 })
    const api = await app.inject({ method: 'GET', url: '/plants', headers: bearer('pst_wrong') })
    assert.equal(api.statusCode, 401)
    for (let i = 0; i < 2; i++) assert.equal((await scrape(bearer(`wrong-metrics-token-${i}`))).statusCode, 401)
    const limited = await scrape(bearer('wrong-metrics-token-3'))
    assert.equal(limited.statusCode, 429)
    assert.equal(limited.json().error, 42901)
    const wait = Number(limited.headers['retry-after'])
    assert.ok(wait >= 1 && wait <= 60, `Retry-After ${wait} is the rest of the window`)
    assert.equal((await scrape(bearer(METRICS_TOKEN))).statusCode, 429, 'a right guess does not get through either')
    const plants = await app.inject({ method: 'GET', url: '/plants', headers })
    assert.equal(plants.statusCode, 429, 'the API shares the count')
  })

  test('does not count a scrape without any token toward the limit', async () => {
    const { scrape } = await metricsApp({ max: 1, windowMs: 60_000 })
    for (let i = 0; i < 3; i++) assert.equal((await scrape({})).statusCode, 401)
    assert.equal((await scrape(bearer(METRICS_TOKEN))).statusCode, 200)
  })
})
