import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { chromium, type Browser, type Page } from 'playwright-core'
import { ErrorCatalogue } from '../../src/errors.js'
import { cleanup, eventually, http, startServer, type ServerProcess } from '../helpers/server-process.js'

// Debian's chromium, driven by playwright-core (which downloads no browser of its own). CI installs it and sets
// PLANTSTORE_TEST_REQUIRE_BROWSER=1, so a missing browser fails there instead of skipping.
const CHROMIUM = process.env.PLANTSTORE_TEST_CHROMIUM || '/usr/bin/chromium'
const REQUIRED = process.env.PLANTSTORE_TEST_REQUIRE_BROWSER === '1'
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update']
// Where to save a screenshot of the page with POST /plants open (docs/api-reference.png is made so).
const SCREENSHOT = process.env.PLANTSTORE_TEST_DOCS_SCREENSHOT || undefined

// What a newcomer sees before scrolling: a laptop's browser window, less its own bars.
const FIRST_SCREEN = 800
// Any value of the catalogue, standing alone (not a port after a colon, which may look like one).
const ERROR_VALUE = new RegExp(
  `(?<![:\\d])(${Object.values(ErrorCatalogue)
    .map((entry) => entry.error)
    .join('|')})(?!\\d)`,
)

const skip = existsSync(CHROMIUM) || REQUIRED ? false : `no browser at ${CHROMIUM} (apt-get install chromium)`

after(cleanup)

/** Expands an operation, presses "Try it out" and "Execute", and resolves with the status and body shown. */
async function tryItOut(page: Page, operationId: string): Promise<{ status: string; body: string }> {
  const block = page.locator(`#operations-plants-${operationId}`)
  await block.locator('.opblock-summary').first().click()
  await block.locator('button.try-out__btn').click()
  await block.locator('button.execute').click()
  const response = block.locator('.live-responses-table tbody .response').first()
  const status = (await response.locator('.response-col_status').innerText()).trim()
  const body = await response.locator('.response-col_description pre').first().innerText()
  return { status, body }
}

/** The texts on the page, as far as `bottom` px down, that hold a value of the error catalogue. */
async function errorValuesAbove(page: Page, bottom: number): Promise<string[]> {
  const found: string[] = []
  for (const element of await page.getByText(ERROR_VALUE).all()) {
    const box = await element.boundingBox()
    if (box && box.y < bottom) found.push(await element.innerText())
  }
  return found
}

const bottomOf = (box: { y: number; height: number } | null) => (box ? box.y + box.height : Infinity)

/** The top of the page down to POST /plants' answer: the example body sent and the plant it got back. */
async function screenshot(page: Page, path: string): Promise<void> {
  const answer = await page.locator('#operations-plants-createPlant .live-responses-table').boundingBox()
  assert.ok(answer, 'the answer is on the page')
  await page.screenshot({ path, fullPage: true, clip: { x: 0, y: 0, width: 1280, height: answer.y + answer.height } })
}

describe('the API reference at /docs in Chromium', { skip }, () => {
  let server: ServerProcess
  let browser: Browser
  let page: Page
  const token = 'docs-' + randomBytes(30).toString('base64url')
  const requests: string[] = []
  const consoleErrors: string[] = []

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: apt-get install chromium`)
    server = await startServer({ env: { PLANTSTORE_BOOTSTRAP_TOKEN: token } })
    // The bootstrap token is stored just after the server listens.
    await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token })).status === 200, 10_000)
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS })
    page = await browser.newPage({ viewport: { width: 1280, height: 1600 } })
    page.on('request', (request) => requests.push(request.url()))
    page.on('console', (message) => message.type() === 'error' && consoleErrors.push(message.text()))
    page.on('pageerror', (error) => consoleErrors.push(error.message))
    await page.goto(`${server.baseUrl}/docs`)
    await page.locator('#operations-plants-createPlant').waitFor()
  })
  after(async () => {
    await browser?.close()
    await server?.stop()
  })

  test('renders the four plant operations', async () => {
    for (const operationId of ['createPlant', 'listPlants', 'getPlant', 'deletePlant']) {
      assert.equal(await page.locator(`#operations-plants-${operationId}`).count(), 1, operationId)
    }
    assert.match(await page.locator('#operations-plants-createPlant').innerText(), /POST\s*\/plants/)
    assert.match(await page.locator('#operations-plants-getPlant').innerText(), /GET\s*\/plants\/\{id\}/)
    assert.match(await page.locator('#operations-plants-deletePlant').innerText(), /DELETE\s*\/plants\/\{id\}/)
  })

  test("opens on the operations, under the service's name where Fastify's logo was", async () => {
    assert.equal(await page.title(), 'Plant Store API reference')
    const logo = await page.locator('.topbar-wrapper img').getAttribute('src')
    assert.match(
      Buffer.from(logo!.replace(/^data:image\/svg\+xml;base64,/, ''), 'base64').toString(),
      />Plant Store API</,
    )
    const first = await page.locator('#operations-plants-createPlant').boundingBox()
    assert.ok(first && first.y < 800, `the first operation starts ${first?.y} px down, below the first screen`)
  })

  test('opens with how to get a token and the Authorize button on the first screen, and no error value on it', async () => {
    const howTo = page.locator('.information-container').getByText('plantstore tokens create')
    const authorize = page.locator('.auth-wrapper button.authorize')
    for (const width of [1280, 1024]) {
      await page.setViewportSize({ width, height: 1600 })
      // Each is on the page already (count() does not wait): where it ends, or Infinity when it is not there.
      const end = async (at: typeof howTo) => ((await at.count()) === 1 ? bottomOf(await at.boundingBox()) : Infinity)
      const seen = {
        howTo: await end(howTo),
        authorize: await end(authorize),
        errorValues: await errorValuesAbove(page, FIRST_SCREEN),
      }
      assert.ok(seen.howTo < FIRST_SCREEN && seen.authorize < FIRST_SCREEN, `${width} px wide: ${JSON.stringify(seen)}`)
      assert.deepEqual(seen.errorValues, [], `${width} px wide: ${JSON.stringify(seen)}`)
    }
    await page.setViewportSize({ width: 1280, height: 1600 })
  })

  test('shows the error catalogue with the Error schema, after the operations', async () => {
    const models = page.locator('section.models article')
    const error = models.filter({ has: page.locator('.json-schema-2020-12__title', { hasText: /^Error$/ }) }).first()
    await error.locator('button.json-schema-2020-12-accordion').first().click()
    const entry = error.locator('td', { hasText: /^40401$/ }).first()
    await entry.waitFor()
    const operations = await page.locator('.opblock').last().boundingBox()
    const row = await entry.boundingBox()
    assert.ok(operations && row && row.y > operations.y, 'the catalogue comes after the last operation')
    await error.locator('button.json-schema-2020-12-accordion').first().click()
  })

  test('after Authorize with a token, Try it out on POST /plants (its example) and GET /plants answers 200 with the plant', async () => {
    await page.locator('.auth-wrapper button.authorize').click()
    // The first scheme, bearerAuth: the service's own token (the second, jwtBearer, takes a JWT).
    const bearerAuth = page.locator('.modal-ux .auth-container').first()
    await bearerAuth.locator('input').fill(token)
    await bearerAuth.locator('.auth-btn-wrapper button.authorize').click()
    await page.locator('.modal-ux button.btn-done').first().click()

    const created = await tryItOut(page, 'createPlant')
    assert.equal(created.status, '200', created.body)
    assert.deepEqual(JSON.parse(created.body), { name: 'Monstera', tag: 'tropical' })
    if (SCREENSHOT !== undefined) await screenshot(page, SCREENSHOT)

    const listed = await tryItOut(page, 'listPlants')
    assert.equal(listed.status, '200', listed.body)
    assert.deepEqual(JSON.parse(listed.body), [{ name: 'Monstera', tag: 'tropical' }])
  })

  test('asks no host but the service for anything, and logs no console error', () => {
    const origin = new URL(server.baseUrl).origin
    // Only network requests: data: and about: URLs never leave the page.
    const network = requests.filter((url) => /^(https?|wss?):/.test(url))
    const elsewhere = network.filter((url) => new URL(url).origin !== origin)
    assert.deepEqual(elsewhere, [])
    const documents = network.filter((url) => /\/openapi\.json$|\/docs\/(json|yaml)/.test(url))
    assert.deepEqual(documents, [`${origin}/openapi.json`], 'loads the one public document, once')
    assert.deepEqual(consoleErrors, [])
  })
})
