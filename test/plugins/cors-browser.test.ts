import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { chromium, type Browser, type Page } from 'playwright-core'
import { cleanup, eventually, http, startServer, type ServerProcess } from '../helpers/server-process.js'

// As test/routes/docs-browser.test.ts: Debian's chromium, a failure instead of a skip where CI requires it.
const CHROMIUM = process.env.PLANTSTORE_TEST_CHROMIUM || '/usr/bin/chromium'
const REQUIRED = process.env.PLANTSTORE_TEST_REQUIRE_BROWSER === '1'
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update']
const skip = existsSync(CHROMIUM) || REQUIRED ? false : `no browser at ${CHROMIUM} (apt-get install chromium)`

after(cleanup)

/** A page of a web app on a loopback origin of its own: an empty HTML document, for the test's script to run in. */
async function appOrigin(): Promise<{ origin: string; server: Server }> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html>'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }
}

interface Outcome {
  created?: number
  body?: string
  link?: string | null
  requestId?: string | null
  replayed?: string | null
  error?: string
}

/**
 * From the page: creates plants `ids`, each with an Idempotency-Key, sends the last create again with its key (a
 * retry), and lists one plant, as a web app would with fetch.
 */
function callFrom(page: Page, api: string, token: string, ids: number[]): Promise<Outcome> {
  return page.evaluate(
    async ({ api, token, ids }) => {
      const authorization = `Bearer ${token}`
      try {
        // One loop, no named function: tsx would wrap one in a helper the page does not have.
        const responses: Response[] = []
        for (const id of [...ids, ids[ids.length - 1]!]) {
          responses.push(
            await fetch(`${api}/plants`, {
              method: 'POST',
              headers: { authorization, 'content-type': 'application/json', 'idempotency-key': `page-${id}` },
              body: JSON.stringify({ id, name: `from the page ${id}` }),
            }),
          )
        }
        const [created, retried] = responses.slice(-2) as [Response, Response]
        const listed = await fetch(`${api}/plants?limit=1`, { headers: { authorization } })
        return {
          created: created?.status,
          body: await created?.text(),
          link: listed.headers.get('link'),
          requestId: listed.headers.get('x-request-id'),
          replayed: retried.headers.get('idempotent-replayed'),
        }
      } catch (err) {
        return { error: String(err) }
      }
    },
    { api, token, ids },
  )
}

describe('the API called from a page on another origin, in Chromium', { skip }, () => {
  let service: ServerProcess
  let browser: Browser
  let allowed: { origin: string; server: Server }
  let refused: { origin: string; server: Server }
  const token = 'cors-' + randomBytes(30).toString('base64url')

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: apt-get install chromium`)
    allowed = await appOrigin()
    refused = await appOrigin()
    service = await startServer({
      env: { PLANTSTORE_BOOTSTRAP_TOKEN: token, PLANTSTORE_CORS_ORIGINS: `https://app.example.com,${allowed.origin}` },
    })
    await eventually(async () => (await http(service.baseUrl, 'GET', '/plants', { token })).status === 200, 10_000)
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS })
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    allowed?.server.close()
    refused?.server.close()
  })

  const pageOn = async (origin: string) => {
    const page = await browser.newPage()
    await page.goto(`${origin}/`)
    return page
  }

  test('lets a page on an origin of PLANTSTORE_CORS_ORIGINS create and list, reading the headers it needs', async () => {
    const outcome = await callFrom(await pageOn(allowed.origin), service.baseUrl, token, [1, 2])
    assert.equal(outcome.error, undefined, outcome.error)
    assert.equal(outcome.created, 200)
    assert.equal(outcome.body, '{"name":"from the page 2"}')
    assert.match(outcome.link ?? '', /rel="next"/, 'the Link header is exposed to the page')
    assert.match(outcome.requestId ?? '', /.+/, 'X-Request-Id is exposed to the page')
    assert.equal(outcome.replayed, 'true', 'Idempotency-Key is allowed, and Idempotent-Replayed exposed')
  })

  test('keeps a page on another origin out: its fetch fails and its POST is never sent', async () => {
    const outcome = await callFrom(await pageOn(refused.origin), service.baseUrl, token, [3])
    assert.match(outcome.error ?? '', /TypeError: Failed to fetch/)
    const stored = await http(service.baseUrl, 'GET', '/plants?fields=id,name', { token })
    assert.deepEqual(
      (JSON.parse(stored.text) as Array<{ id: number }>).map((plant) => plant.id),
      [1, 2],
      'the preflight refused, the browser sent no POST',
    )
  })
})
