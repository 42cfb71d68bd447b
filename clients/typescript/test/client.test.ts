import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { backends, type TestDatabase } from '../../../test/helpers/backends.js'
import {
  cleanup,
  eventually,
  http,
  runCli,
  startServer,
  type ServerProcess,
} from '../../../test/helpers/server-process.js'
import { createClient, ErrorCode, PlantStoreError, type Plant, type PlantStoreClient } from '../src/index.js'

after(cleanup)

const EDGE_IDS = [-9223372036854775808n, 9007199254740992n, 9007199254740993n, 9223372036854775807n]

/** A token of `account` with `scopes`, made with the CLI on `database`. */
async function cliToken(database: string, account: string, scopes: string[]): Promise<string> {
  const args = scopes.flatMap((scope) => ['--scope', scope])
  const result = await runCli(['tokens', 'create', '--account', account, ...args, '--database', database])
  assert.equal(result.code, 0, result.stderr)
  return result.stdout.split('\n')[0]!
}

/** Creates `count` plants tagged `tag` with ids from `first`, fifty requests at a time. */
async function createMany(client: PlantStoreClient, first: bigint, count: number, tag: string): Promise<void> {
  for (let start = 0; start < count; start += 50) {
    const batch = Array.from({ length: Math.min(50, count - start) }, (_, i) => first + BigInt(start + i))
    await Promise.all(batch.map((id) => client.plants.create({ id, name: `plant ${id}`, tag })))
  }
}

async function listAll(client: PlantStoreClient, options?: { limit?: number; tag?: string }): Promise<Plant[]> {
  const plants: Plant[] = []
  for await (const plant of client.plants.list(options)) plants.push(plant)
  return plants
}

/**
 * A fetch whose first `lost` requests reach the server but whose answers do not come back, as when the connection
 * drops after the request went out; it counts every request, and keeps the Idempotency-Key each sent and whether
 * each answer that came back was a replay.
 */
function losingAnswers(lost: number) {
  const counted = {
    calls: 0,
    keys: [] as Array<string | null>,
    replayed: [] as Array<string | null>,
    fetch: async (request: Request) => {
      counted.keys.push(request.headers.get('idempotency-key'))
      const response = await fetch(request)
      if (++counted.calls > lost) return (counted.replayed.push(response.headers.get('idempotent-replayed')), response)
      await response.arrayBuffer()
      throw new TypeError('fetch failed (the connection dropped after the request went out)')
    },
  }
  return counted
}

/** One answer a recording fetch saw: when its request was sent, its status and Retry-After. */
interface Seen {
  sentAt: number
  status: number
  retryAfter: string | null
}

/** A fetch that records each answer before handing it on. */
function recordingFetch(seen: Seen[]) {
  return async (request: Request) => {
    const sentAt = Date.now()
    const response = await fetch(request)
    seen.push({ sentAt, status: response.status, retryAfter: response.headers.get('retry-after') })
    return response
  }
}

/**
 * The answers the server at `baseUrl` gave, by status, from its metrics; a connection the per-address cap refused
 * was answered 429 too.
 */
async function answersByStatus(baseUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text()
  const counts = new Map<string, number>()
  const add = (status: string, n: string) => counts.set(status, (counts.get(status) ?? 0) + Number(n))
  for (const [, status, n] of text.matchAll(/^plantstore_http_requests_total\{[^}]*status="(\d+)"[^}]*\} (\d+)$/gm)) {
    add(status!, n!)
  }
  const refused = /^plantstore_http_connections_refused_total\{limit="address"\} (\d+)$/m.exec(text)
  if (refused) add('429', refused[1]!)
  return counts
}

/**
 * A server on a fresh database of `backend` seeded with the bootstrap token `token` and `env`, started before the
 * suite's tests (once it accepts the token) and stopped after them; `server` is set once started.
 */
function serverFor(backend: (typeof backends)[number], token: string, env: Record<string, string> = {}) {
  const running: { server?: ServerProcess; database?: TestDatabase } = {}
  before(async () => {
    running.database = await backend.createDatabase()
    running.server = await startServer({
      database: running.database.url,
      env: { PLANTSTORE_BOOTSTRAP_TOKEN: token, ...env },
    })
    // The bootstrap token is stored just after the server listens.
    const url = running.server.baseUrl
    await eventually(async () => (await http(url, 'GET', '/plants', { token })).status !== 401, 10_000)
  })
  after(async () => {
    await running.server?.stop()
    await running.database?.dispose()
  })
  return running as { server: ServerProcess }
}

for (const backend of backends) {
  describe(`@plantstore/client against plantstore serve on ${backend.name}`, () => {
    let database: TestDatabase
    let server: ServerProcess
    let client: PlantStoreClient
    let token: string

    before(async () => {
      database = await backend.createDatabase()
      const bootstrap = 'client-' + randomBytes(30).toString('base64url')
      // No rate limit here: the 2,500 creations come in bursts of fifty. Delivery off: the subscription's URL
      // answers nothing.
      server = await startServer({
        database: database.url,
        env: {
          PLANTSTORE_BOOTSTRAP_TOKEN: bootstrap,
          PLANTSTORE_RATE_LIMIT: '0',
          PLANTSTORE_WEBHOOK_DELIVERY: 'false',
          PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
        },
      })
      token = await cliToken(database.url, 'client', ['plants:read', 'plants:write', 'webhooks:manage'])
      client = createClient({ baseUrl: server.baseUrl, token })
    })
    after(async () => {
      await server?.stop()
      await database?.dispose()
    })

    test('creates, lists, gets and deletes plants with ids exact over the whole int64 range', async () => {
      for (const id of EDGE_IDS) {
        assert.deepEqual(await client.plants.create({ id, name: `edge ${id}`, tag: 'edge' }), {
          id,
          name: `edge ${id}`,
          tag: 'edge',
        })
      }
      const listed = await listAll(client, { tag: 'edge' })
      assert.deepEqual(
        listed.map((plant) => plant.id),
        EDGE_IDS,
        'each id once, exact, neighbours apart, ascending',
      )
      assert.deepEqual(listed[2], { id: 9007199254740993n, name: 'edge 9007199254740993', tag: 'edge' })
      for (const id of EDGE_IDS) assert.deepEqual(await client.plants.get(id), { id, name: `edge ${id}`, tag: 'edge' })
      for (const id of EDGE_IDS) await client.plants.delete(id)
      assert.deepEqual(await listAll(client, { tag: 'edge' }), [])
    })

    test('takes a safe-integer number as an id and gives it back as a bigint', async () => {
      assert.deepEqual(await client.plants.create({ id: 42, name: 'Fern' }), { id: 42n, name: 'Fern' })
      await client.plants.delete(42)
    })

    test('lists 2,500 plants through the iterator, each once, in ascending id order', async () => {
      const first = 1_000_000n
      await createMany(client, first, 2500, 'many')
      const listed = await listAll(client, { limit: 300, tag: 'many' })
      assert.equal(listed.length, 2500)
      listed.forEach((plant, i) => {
        assert.equal(plant.id, first + BigInt(i))
        assert.equal(plant.name, `plant ${plant.id}`)
      })
    })

    test('reads one page and the cursor of the next; the last page has none', async () => {
      await createMany(client, 500n, 3, 'paged')
      const page = await client.plants.page({ limit: 2, tag: 'paged' })
      assert.deepEqual(
        page.plants.map((plant) => plant.id),
        [500n, 501n],
      )
      assert.ok(page.nextCursor)
      const last = await client.plants.page({ limit: 2, tag: 'paged', cursor: page.nextCursor })
      assert.deepEqual(last, { plants: [{ id: 502n, name: 'plant 502', tag: 'paged' }], nextCursor: undefined })
      assert.deepEqual(await client.plants.page({ tag: 'no such tag' }), { plants: [], nextCursor: undefined })
    })

    test('surfaces a 409 as a PlantStoreError with the conflict code', async () => {
      await client.plants.create({ id: 7n, name: 'Monstera' })
      await assert.rejects(client.plants.create({ id: 7n, name: 'Cactus' }), (err: unknown) => {
        assert.ok(err instanceof PlantStoreError)
        assert.equal(err.status, 409)
        assert.equal(err.code, ErrorCode.conflict)
        assert.equal(err.code, 40901)
        assert.match(err.message, /already exists/)
        assert.match(err.requestId ?? '', /.+/)
        return true
      })
      // The same plant again is a safe retry.
      assert.deepEqual(await client.plants.create({ id: 7n, name: 'Monstera' }), { id: 7n, name: 'Monstera' })
    })

    test('surfaces getting or deleting a missing plant as a PlantStoreError with plantNotFound', async () => {
      await assert.rejects(client.plants.get(123456789n), { status: 404, code: ErrorCode.plantNotFound })
      await assert.rejects(client.plants.delete(123456789n), { status: 404, code: ErrorCode.plantNotFound })
    })

    test('surfaces a refused token as a PlantStoreError with invalidToken', async () => {
      const stranger = createClient({ baseUrl: server.baseUrl, token: 'pst_' + 'A'.repeat(43) })
      await assert.rejects(stranger.plants.page(), { status: 401, code: ErrorCode.invalidToken })
    })

    test('refuses ids it cannot send exactly, before sending anything', async () => {
      await assert.rejects(client.plants.create({ id: 9007199254740993, name: 'x' }), RangeError)
      await assert.rejects(client.plants.create({ id: 1.5, name: 'x' }), RangeError)
      await assert.rejects(client.plants.delete(2n ** 63n), RangeError)
      await assert.rejects(client.plants.get(-(2n ** 63n) - 1n), RangeError)
    })

    test('retries a create whose answer was lost on the way back, with the same Idempotency-Key: the first answer comes back', async () => {
      const losing = losingAnswers(1)
      const store = createClient({ baseUrl: server.baseUrl, token, fetch: losing.fetch })
      assert.deepEqual(await store.plants.create({ id: 77n, name: 'Aloe' }), { id: 77n, name: 'Aloe' })
      assert.equal(losing.calls, 2)
      assert.match(losing.keys[0] ?? '', /^[0-9a-f-]{36}$/)
      assert.equal(losing.keys[1], losing.keys[0])
      assert.deepEqual(losing.replayed, ['true'])
      // Each call its own key.
      await store.plants.create({ id: 78n, name: 'Agave' })
      assert.notEqual(losing.keys[2], losing.keys[0])
    })

    test('takes an Idempotency-Key of the caller: the same key with another plant is a 422', async () => {
      await client.plants.create({ id: 79n, name: 'Yucca' }, { idempotencyKey: 'my-import-79' })
      await client.plants.delete(79n)
      assert.deepEqual(await client.plants.create({ id: 79n, name: 'Yucca' }, { idempotencyKey: 'my-import-79' }), {
        id: 79n,
        name: 'Yucca',
      })
      await assert.rejects(client.plants.get(79n), { status: 404 }, 'the replay did not create it again')
      await assert.rejects(client.plants.create({ id: 80n, name: 'Other' }, { idempotencyKey: 'my-import-79' }), {
        status: 422,
        code: ErrorCode.idempotencyKeyReused,
      })
    })

    test('repeats a POST /webhooks whose answer was lost: the retry gets the same subscription and secret, one made', async () => {
      const losing = losingAnswers(1)
      const store = createClient({ baseUrl: server.baseUrl, token, fetch: losing.fetch })
      const made = await store.webhooks.create({ url: 'http://127.0.0.1:9/lost' })
      assert.equal(losing.calls, 2)
      assert.deepEqual(losing.replayed, ['true'])
      assert.match(made.secret, /^whsec_/)
      const listed = await client.webhooks.list()
      assert.deepEqual(
        listed.map((subscription) => subscription.id),
        [made.id],
      )
      await client.webhooks.delete(made.id)
    })

    test('creates, lists and deletes webhook subscriptions', async () => {
      const created = await client.webhooks.create({ url: 'http://127.0.0.1:9/events', events: ['plant.created'] })
      assert.match(created.secret, /^whsec_/)
      assert.equal(created.status, 'active')
      const listed = await client.webhooks.list()
      assert.deepEqual(
        listed.map((subscription) => subscription.id),
        [created.id],
      )
      assert.equal('secret' in listed[0]!, false)
      await client.webhooks.delete(created.id)
      assert.deepEqual(await client.webhooks.list(), [])
      await assert.rejects(client.webhooks.delete(created.id), { status: 404, code: ErrorCode.subscriptionNotFound })
    })
  })

  describe(`@plantstore/client on a server with default settings, on ${backend.name}`, () => {
    const token = 'defaults-' + randomBytes(30).toString('base64url')
    const running = serverFor(backend, token)

    test('creates 1,500 plants in a row and lists them all, pacing itself so that nothing is refused', async () => {
      const seen: Seen[] = []
      const client = createClient({ baseUrl: running.server.baseUrl, token, fetch: recordingFetch(seen) })
      for (let id = 1n; id <= 1500n; id++) await client.plants.create({ id, name: `plant ${id}` })
      const listed = await listAll(client)
      assert.deepEqual(
        listed.map((plant) => plant.id),
        Array.from({ length: 1500 }, (_, i) => BigInt(i + 1)),
      )
      const statuses = new Set(seen.map((answer) => answer.status))
      assert.deepEqual([...statuses], [200], 'no 429: the RateLimit field said when to wait')
      assert.ok(seen.length === 1500 + 15, `${seen.length} requests: each create once, 15 pages of 100`)
    })
  })

  describe(`@plantstore/client issuing requests at once on a server limited to 250/s, on ${backend.name}`, () => {
    const token = 'burst-' + randomBytes(30).toString('base64url')
    // A budget refilled in a second, so that 1,500 take a few. The client never has more requests out than the
    // budget holds: 250, under the per-address connection cap (256), whose refusals are 429s too.
    const running = serverFor(backend, token, { PLANTSTORE_RATE_LIMIT: '250/s' })

    test('paces 1,500 creates issued at once by the RateLimit fields: the server answers none 429, and all are made', async () => {
      const client = createClient({ baseUrl: running.server.baseUrl, token })
      const ids = Array.from({ length: 1500 }, (_, i) => BigInt(i + 1))
      const settled = await Promise.allSettled(ids.map((id) => client.plants.create({ id, name: `plant ${id}` })))
      // Counted by the server: the client's retries would hide a 429 from the caller, not from the answers.
      const answers = await answersByStatus(running.server.baseUrl)
      const failed = settled.filter((outcome) => outcome.status === 'rejected').length
      assert.equal(answers.get('429'), undefined, `429s answered: ${JSON.stringify([...answers])}; ${failed} failed`)
      assert.deepEqual(
        settled.map((outcome) => outcome.status === 'fulfilled' && outcome.value.id),
        ids,
      )
      assert.ok(answers.get('200')! >= 1500, 'every create answered 200 once')
      assert.equal((await listAll(client, { limit: 1000 })).length, 1500)
    })
  })

  describe(`@plantstore/client retrying a rate-limited request on ${backend.name}`, () => {
    const token = 'limited-' + randomBytes(30).toString('base64url')
    const running = serverFor(backend, token, { PLANTSTORE_RATE_LIMIT: '2/s' })

    test('waits out a 429 with Retry-After: 1 and succeeds', async () => {
      const seen: Seen[] = []
      // Two requests fit the budget; a third within half a second is refused. A client of its own for each request:
      // one client would pace itself by the RateLimit field and never be refused.
      for (let i = 0; i < 10 && !seen.some((answer) => answer.status === 429); i++) {
        await createClient({ baseUrl: running.server.baseUrl, token, fetch: recordingFetch(seen) }).plants.page({
          limit: 1,
        })
      }
      const limited = seen.findIndex((answer) => answer.status === 429)
      assert.ok(limited >= 0, `a 429 among ${JSON.stringify(seen)}`)
      assert.equal(seen[limited]!.retryAfter, '1')
      assert.equal(seen.at(-1)!.status, 200)
      assert.equal(seen.length, limited + 2, 'one retry, answered')
      assert.ok(seen.at(-1)!.sentAt - seen[limited]!.sentAt >= 900, 'the retry came after the second Retry-After asked')
    })

    test('with retries: 0, a 429 is a PlantStoreError with rateLimited at once', async () => {
      // Not paced: a paced client would hold the burst to the budget and not be refused.
      const client = createClient({ baseUrl: running.server.baseUrl, token, retries: 0, pacing: false })
      const answers = await Promise.allSettled([1, 2, 3, 4, 5, 6].map(() => client.plants.page({ limit: 1 })))
      const refused = answers.find((answer) => answer.status === 'rejected')
      assert.ok(refused, 'a burst of six requests at 2/s is refused in part')
      assert.ok(refused.reason instanceof PlantStoreError)
      assert.equal(refused.reason.status, 429)
      assert.equal(refused.reason.code, ErrorCode.rateLimited)
    })
  })
}
