import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { backends, POSTGRES_URL, postgresBackend, type TestDatabase } from '../helpers/backends.js'
import { startReceiver, verified, type Receiver } from '../helpers/receiver.js'
import { once } from '../helpers/once.js'
import { cleanup, eventually, http, runCli, startServer, type ServerProcess } from '../helpers/server-process.js'

after(cleanup)

const TOKEN = 'webhooks-' + randomBytes(30).toString('base64url')
// Loopback receivers need the flag; fast retries so a test sees several attempts.
const ENV = {
  PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN,
  PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
  PLANTSTORE_WEBHOOK_RETRY_BASE_MS: '100',
  PLANTSTORE_WEBHOOK_TIMEOUT_MS: '1000',
  PLANTSTORE_RATE_LIMIT: '0',
  PLANTSTORE_ACCOUNT_RATE_LIMIT: '0',
}

/** Subscribes the default account with the CLI; returns the secret it printed. */
async function subscribe(database: string, url: string, env: Record<string, string> = ENV): Promise<string> {
  const added = await runCli(['webhooks', 'add', '--account', 'default', '--url', url, '--database', database], env)
  assert.equal(added.code, 0, added.stderr)
  assert.match(added.stderr, /^Created whk_[0-9a-f]{16} for account default: plant.created plant.deleted to /m)
  return added.stdout.split('\n')[0]!
}

/** Whether the server's /metrics has a line matching `pattern`. */
const metricsShow = (server: ServerProcess, pattern: RegExp) => async () =>
  pattern.test((await http(server.baseUrl, 'GET', '/metrics')).text)

/** The webhook attempts a server has made, whatever their outcome, by its /metrics. */
async function attemptsBy(server: ServerProcess): Promise<number> {
  const text = (await http(server.baseUrl, 'GET', '/metrics')).text
  const counts = [...text.matchAll(/^plantstore_webhook_deliveries_total\{outcome="\w+"\} (\d+)$/gm)]
  return counts.reduce((sum, match) => sum + Number(match[1]), 0)
}

const post = (server: ServerProcess, id: number) =>
  http(server.baseUrl, 'POST', '/plants', { token: TOKEN, body: { id, name: `Plant ${id}` } })

for (const backend of backends) {
  describe(`webhooks through plantstore serve and the CLI (${backend.name})`, () => {
    let database: TestDatabase
    let receiver: Receiver
    let server: ServerProcess
    // The delivery tests share one subscription, made with the CLI by whichever of them runs first.
    const subscribed = once(() => subscribe(database.url, receiver.url))
    before(async () => {
      database = await backend.createDatabase()
      receiver = await startReceiver()
      server = await startServer({ database: database.url, env: ENV })
      await eventually(
        async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200,
        10_000,
      )
    })
    after(async () => {
      await cleanup()
      await receiver.close()
      await database.dispose()
    })

    test('plantstore webhooks add refuses a loopback URL without PLANTSTORE_WEBHOOK_ALLOW_PRIVATE, naming --url', async () => {
      const refused = await runCli([
        'webhooks',
        'add',
        '--account',
        'default',
        '--url',
        receiver.url,
        '--database',
        database.url,
      ])
      assert.equal(refused.code, 1)
      assert.match(
        refused.stderr,
        /^plantstore: --url: host 127\.0\.0\.1 is not a public address; PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it\n$/,
      )
    })

    test('a plant created through the API reaches a subscription made with the CLI, signed with its secret', async () => {
      const secret = await subscribed()
      const listed = await runCli(['webhooks', 'list', '--database', database.url])
      assert.match(
        listed.stdout,
        /^whk_[0-9a-f]{16}\s+default\s+plant.created,plant.deleted\s+active\s+0\s+-\s+\S+\s+http:\/\/127\.0\.0\.1:\d+\/hook$/m,
      )
      assert.ok(!listed.stdout.includes(secret.slice(6)), 'no secret in the list')
      assert.equal((await post(server, 1)).status, 200)
      const [request] = await receiver.waitFor(1)
      assert.equal(request!.body, '{"id":1,"name":"Plant 1"}')
      assert.ok(verified(secret, request!))
      // The outcome is recorded just after the receiver answers.
      await eventually(metricsShow(server, /^plantstore_webhook_deliveries_total\{outcome="delivered"\} [1-9]/m), 5000)
      await eventually(metricsShow(server, /^plantstore_webhook_queue_depth 0$/m), 5000)
    })

    test('an event written by a server killed (SIGKILL) before any attempt is delivered after the restart', async () => {
      await subscribed()
      // This server writes events but does not deliver them: the kill comes between the write and the delivery.
      await server.stop('SIGKILL')
      server = await startServer({ database: database.url, env: { ...ENV, PLANTSTORE_WEBHOOK_DELIVERY: 'false' } })
      const before = receiver.received.length
      assert.equal((await post(server, 3)).status, 200)
      // Queued, not delivered, as the server is killed.
      await eventually(metricsShow(server, /^plantstore_webhook_queue_depth 1$/m), 5000)
      await server.stop('SIGKILL')
      server = await startServer({ database: database.url, env: ENV })
      const [request] = (await receiver.waitFor(before + 1)).slice(before)
      assert.equal(request!.body, '{"id":3,"name":"Plant 3"}')
      // Counted by the server started after the kill: had the killed one delivered the event, this one would have
      // found nothing to deliver, however long the test had waited before the kill.
      await eventually(metricsShow(server, /^plantstore_webhook_deliveries_total\{outcome="delivered"\} 1$/m), 5000)
      assert.equal(receiver.received.length, before + 1, 'delivered once')
    })

    test('an event whose server is killed (SIGKILL) while retrying it is delivered after the restart', async () => {
      await subscribed()
      receiver.answer = () => ({ status: 503 })
      const before = receiver.received.length
      assert.equal((await post(server, 2)).status, 200)
      await receiver.waitFor(before + 1)
      await server.stop('SIGKILL')
      const failedId = receiver.received.at(-1)!.headers['webhook-id']
      receiver.answer = () => ({ status: 200 })
      server = await startServer({ database: database.url, env: ENV })
      const plantTwo = () => receiver.received.filter((request) => request.body === '{"id":2,"name":"Plant 2"}')
      // An attempt cut by the kill is due again once its lease (timeout + 10 s) runs out.
      await eventually(async () => plantTwo().some((request) => request.status === 200), 30_000)
      const delivered = plantTwo()
      assert.ok(delivered.length >= 2)
      assert.ok(
        delivered.every((request) => request.headers['webhook-id'] === failedId),
        'one event id throughout',
      )
    })
  })
}

// Runs with the PostgreSQL half of the suite (see test/storage/backends.test.ts for the skip notice).
if (POSTGRES_URL !== undefined)
  describe('webhooks from two plantstore servers on one PostgreSQL database', () => {
    let database: TestDatabase
    let receiver: Receiver
    let servers: ServerProcess[]
    before(async () => {
      database = await postgresBackend(POSTGRES_URL!).createDatabase()
      receiver = await startReceiver()
      // Slow answers widen the window in which both dispatchers look at the same rows.
      receiver.answer = () => ({ status: 200, delayMs: 20 })
      const first = await startServer({ database: database.url, env: ENV })
      servers = [first, await startServer({ database: database.url, env: ENV })]
      await eventually(
        async () => (await http(first.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200,
        10_000,
      )
    })
    after(async () => {
      await cleanup()
      await receiver.close()
      await database.dispose()
    })

    test('deliver each of 60 events to each of 3 subscriptions exactly once, though both dispatchers claim from one outbox', async () => {
      // Three subscriptions: three deliveries may be in flight at once, claimed by either server.
      for (const s of [1, 2, 3]) await subscribe(database.url, `${receiver.url}?s=${s}`)
      const statuses = await Promise.all(Array.from({ length: 60 }, (_, i) => post(servers[i % 2]!, 100 + i)))
      assert.ok(statuses.every((res) => res.status === 200))
      await receiver.waitFor(180, 30_000)
      // One more event: each subscription's goes out only after every event before it is done, so a second attempt
      // of an earlier one, made by the server whose claim was not the one that counted, would come before it.
      assert.equal((await post(servers[0]!, 999)).status, 200)
      await receiver.waitFor(183, 30_000)
      // Every attempt either server made, counted once its answer came: as many as the receiver got.
      await eventually(
        async () => (await attemptsBy(servers[0]!)) + (await attemptsBy(servers[1]!)) === receiver.received.length,
        10_000,
      )
      const keys = receiver.received.map((request) => `${request.path} ${String(request.headers['webhook-id'])}`)
      assert.equal(keys.length, 183, `${keys.length} deliveries`)
      assert.equal(new Set(keys).size, 183, 'no event delivered twice to a subscription')
      for (const s of [1, 2, 3]) {
        const bodies = new Set(receiver.received.filter((r) => r.path.endsWith(`s=${s}`)).map((r) => r.body))
        for (let i = 0; i < 60; i++) assert.ok(bodies.has(`{"id":${100 + i},"name":"Plant ${100 + i}"}`))
      }
    })
  })
