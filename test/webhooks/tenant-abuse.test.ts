import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, describe, test } from 'node:test'
import { issueToken } from '../../src/auth/issue-token.js'
import { openStorage } from '../../src/storage/index.js'
import { backends } from '../helpers/backends.js'
import { startReceiver } from '../helpers/receiver.js'
import { cleanup, http, REPO_ROOT, startServer } from '../helpers/server-process.js'

after(cleanup)

const SCOPES = ['plants:read', 'plants:write', 'webhooks:manage']
const ATTACK_SECONDS = 10
// Before the attack, what /healthz takes on this machine, now: idle, then under the same flood without subscriptions.
const BASELINE_SECONDS = 5
// The queue cap, lowered from 10,000 so that a CI machine's 10 s of POSTs fill it: every subscription of the
// attacker is then disabled mid-attack and its queue failed in batches while the attack goes on.
const QUEUE_CAP = 1500

/** A loopback URL where nothing listens: every attempt is refused at once. */
async function refusingUrl(): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}/hook`
}

/** POSTs fresh plants (ids from `firstId`) for `seconds` from a process of its own; resolves with the count per status. */
function flood(baseUrl: string, token: string, seconds: number, firstId = 1): Promise<Record<string, number>> {
  const script = join(REPO_ROOT, 'test', 'helpers', 'post-flood.ts')
  const args = [script, baseUrl, token, String(seconds), '16', String(firstId)]
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
  return new Promise((resolve, reject) => {
    child.once('exit', (code) =>
      code === 0 ? resolve((JSON.parse(out) as { statuses: Record<string, number> }).statuses) : reject(new Error(out)),
    )
  })
}

/** GET /healthz one after another until `done()`; resolves with each answer's time in milliseconds. */
async function probeHealth(baseUrl: string, done: () => boolean): Promise<number[]> {
  const times: number[] = []
  while (!done()) {
    const started = performance.now()
    const res = await fetch(`${baseUrl}/healthz`)
    await res.arrayBuffer()
    assert.equal(res.status, 200)
    times.push(performance.now() - started)
    await sleep(10)
  }
  return times
}

/** How many plants the token's account holds, counted by reading every page. */
async function countPlants(baseUrl: string, token: string): Promise<number> {
  let count = 0
  for (let path: string | undefined = '/plants?limit=1000'; path !== undefined;) {
    const page = await http(baseUrl, 'GET', path, { token })
    assert.equal(page.status, 200)
    count += (JSON.parse(page.text) as unknown[]).length
    path = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1]
  }
  return count
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!

for (const backend of backends) {
  describe(`one account's webhooks do not degrade another's (${backend.name})`, () => {
    const disposals: Array<() => Promise<void>> = []
    after(async () => {
      for (const dispose of disposals.splice(0).reverse()) await dispose()
    })

    /** A server on a fresh database with accounts mallory and alice, each with a token for plants and webhooks. */
    async function serve(env: Record<string, string>) {
      const database = await backend.createDatabase()
      disposals.push(() => database.dispose())
      const storage = await openStorage(database.url)
      const mallory = await issueToken(storage, { accountName: 'mallory', scopes: SCOPES })
      const alice = await issueToken(storage, { accountName: 'alice', scopes: SCOPES })
      await storage.close()
      const server = await startServer({
        database: database.url,
        env: {
          PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
          PLANTSTORE_RATE_LIMIT: '0',
          PLANTSTORE_ACCOUNT_RATE_LIMIT: '0',
          ...env,
        },
      })
      disposals.push(async () => void (await server.stop()))
      const subscribe = async (token: string, url: string) =>
        (await http(server.baseUrl, 'POST', '/webhooks', { token, body: { url, events: ['plant.created'] } })).status
      const createPlant = async (token: string, id: number) =>
        (await http(server.baseUrl, 'POST', '/plants', { token, body: { id, name: 'Monstera' } })).status
      return { server, mallory: mallory.secret, alice: alice.secret, subscribe, createPlant }
    }

    test('at its subscription cap to a refusing receiver, with 10 s of POSTs: another account is delivered within 30 s and /healthz stays as fast during and after as under the POSTs alone', async (t) => {
      const { server, mallory, alice, subscribe, createPlant } = await serve({
        PLANTSTORE_WEBHOOK_MAX_QUEUED: String(QUEUE_CAP),
      })

      const idleEnd = performance.now() + BASELINE_SECONDS * 1000
      const healthIdle = await probeHealth(server.baseUrl, () => performance.now() > idleEnd)
      let calm = true
      const baselineFlood = flood(server.baseUrl, mallory, BASELINE_SECONDS, 1_000_000).finally(() => (calm = false))
      const healthBaseline = await probeHealth(server.baseUrl, () => !calm)
      const baselineStatuses = await baselineFlood
      assert.deepEqual(Object.keys(baselineStatuses), ['200'], JSON.stringify(baselineStatuses))

      const refused = await refusingUrl()
      for (let i = 0; i < 10; i++) assert.equal(await subscribe(mallory, refused), 201)
      assert.equal(await subscribe(mallory, refused), 409, 'the eleventh is over the default quota of 10')
      const receiver = await startReceiver()
      assert.equal(await subscribe(alice, receiver.url), 201)

      let attacking = true
      const attack = flood(server.baseUrl, mallory, ATTACK_SECONDS).finally(() => (attacking = false))
      const during = probeHealth(server.baseUrl, () => !attacking)
      await sleep(3000)
      const sent = performance.now()
      assert.equal(await createPlant(alice, 1), 200)
      const [delivered] = await receiver.waitFor(1, 30_000)
      const waited = performance.now() - sent
      assert.equal(delivered!.body, '{"id":1,"name":"Monstera"}')

      const statuses = await attack
      const healthDuring = await during
      const afterEnd = performance.now() + 5000
      const healthAfter = await probeHealth(server.baseUrl, () => performance.now() > afterEnd)
      await receiver.close()

      // The attack was real: thousands of changes, each queueing ten deliveries, until the queues reached the cap.
      assert.ok((statuses['200'] ?? 0) >= QUEUE_CAP, `only ${JSON.stringify(statuses)}`)
      // Every POST answered 200, and every plant answered 200 is stored, though deliveries were recorded on the same
      // database all along: on PostgreSQL, transactions of the client's once failed a third of them here with 500
      // and lost some answered 200.
      assert.deepEqual(Object.keys(statuses), ['200'], JSON.stringify(statuses))
      assert.equal(await countPlants(server.baseUrl, mallory), baselineStatuses['200']! + statuses['200']!)
      const listed = await http(server.baseUrl, 'GET', '/webhooks', { token: mallory })
      const subscriptions = JSON.parse(listed.text) as Array<{ status: string; disabledReason: string | null }>
      assert.deepEqual(
        subscriptions.map((s) => [s.status, s.disabledReason]),
        Array.from({ length: 10 }, () => ['disabled', 'backlog']),
      )
      // Bounds on behaviour, not speed claims: before the fixes /healthz took 1.1 s at p99 during such an attack on
      // SQLite and stalled about 0.9 s every second after it, and another account waited a minute. The /healthz
      // bounds are relative to baselines measured above on the same server and machine, whatever else shares its 2
      // cores: during the attack, the POSTs alone; after it, the idle server. 10 times their p99, and no less than
      // 250 ms, below which scheduling noise on 2 shared cores decides (the broken build's stalls were a second). The attack's POSTs also queue deliveries, so some slowing is
      // fair: about 4 times was seen on SQLite, where the broken build was 100 times. The stalls after it came every
      // second, so the p99 after it shows them.
      const floodP99 = percentile(healthBaseline, 99)
      const idleP99 = percentile(healthIdle, 99)
      const p99 = percentile(healthDuring, 99)
      const p99After = percentile(healthAfter, 99)
      const summary = `p99 idle ${idleP99.toFixed(1)} ms, under the POSTs alone ${floodP99.toFixed(1)} ms, during the attack ${p99.toFixed(1)} ms (max ${Math.max(...healthDuring).toFixed(1)}), after it ${p99After.toFixed(1)} ms (max ${Math.max(...healthAfter).toFixed(1)})`
      assert.ok(waited < 30_000, `alice waited ${Math.round(waited)} ms`)
      assert.ok(p99 < Math.max(10 * floodP99, 250), `/healthz during the attack: ${summary}`)
      assert.ok(p99After < Math.max(10 * idleP99, 250), `/healthz after the attack: ${summary}`)
      t.diagnostic(`${JSON.stringify(statuses)}; alice delivered after ${Math.round(waited)} ms; /healthz ${summary}`)
    })

    test('with every delivery slot it may take held by its tarpit receiver: another account is delivered before any attempt times out', async () => {
      // Four slots in the process, four per account: one is kept for an account with no attempt in flight, so
      // mallory's tarpit takes the other three (before, all four, and alice waited for an attempt to time out). A
      // slot of mallory's frees only when an attempt times out.
      const timeoutMs = 4000
      const { server, mallory, alice, subscribe, createPlant } = await serve({
        PLANTSTORE_WEBHOOK_CONCURRENCY: '4',
        PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: '4',
        PLANTSTORE_WEBHOOK_TIMEOUT_MS: String(timeoutMs),
      })
      const tarpit = await startReceiver()
      tarpit.answer = () => 'hang'
      const healthy = await startReceiver()
      try {
        for (let i = 0; i < 10; i++) assert.equal(await subscribe(mallory, tarpit.url), 201)
        assert.equal(await subscribe(alice, healthy.url), 201)
        assert.equal(await createPlant(mallory, 1), 200)
        await tarpit.waitFor(3)
        assert.equal(await createPlant(alice, 1), 200)
        await healthy.waitFor(1, 30_000)
        // Counted, not timed: alice takes the slot kept for her, before any of mallory's attempts timed out.
        const metrics = (await http(server.baseUrl, 'GET', '/metrics')).text
        assert.doesNotMatch(metrics, /^plantstore_webhook_deliveries_total\{outcome="retry"\} [1-9]/m)
        assert.equal(tarpit.received.length, 3, 'mallory held three slots, the reserve left to alice')
        // Three attempts of mallory in flight, no more: her fourth took a slot that an attempt freed by timing out,
        // counted as a retry before the slot was claimed again.
        await tarpit.waitFor(4)
        assert.match(
          (await http(server.baseUrl, 'GET', '/metrics')).text,
          /^plantstore_webhook_deliveries_total\{outcome="retry"\} [1-9]/m,
          'a fourth attempt of mallory before any of the first three timed out',
        )
      } finally {
        await Promise.all([tarpit.close(), healthy.close()])
      }
    })
  })
}
