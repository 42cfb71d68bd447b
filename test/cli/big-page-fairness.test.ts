import assert from 'node:assert/strict'
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import { backends } from '../helpers/backends.js'
import { bigPageDatabase } from '../helpers/big-pages.js'
import { cleanup, eventually, startServer, type ServerProcess } from '../helpers/server-process.js'

after(cleanup)

const PAGE = 1000
// About 330 bytes per plant, so a page of 1,000 is about 330 KB, as in the issue.
const NAME = 'n'.repeat(200)
const TAG = 't'.repeat(100)

// The attack of the issue, scaled to a test on a shared machine: 25 waves, 200 ms apart, of 22 connections from 40
// addresses of the attacker's own, each pipelining 4 pages of 1,000 and reading nothing while the test runs: 550
// connections, 2,200 page requests, within the account's default rate limit. In waves, as clients arrive together:
// before the page budget every page of a wave was made before anyone else's request, a little more work than the
// gap to the next wave, so the wait grew wave after wave (p99 0.8 s on SQLite, 5 s on PostgreSQL). The waves are no
// larger because a wave of connections costs something whatever it asks for: waves of 40 asking for pages of 10
// kept the other account waiting as long as waves of 40 asking for pages of 1,000 with the budget.
const ADDRESSES = 40
const WAVES = 25
const PER_WAVE = 22
const WAVE_GAP_MS = 200
const PIPELINED = 4
// The other account: a request on a new connection from its own address every 40 ms while the attack runs (from its
// first wave), whether the ones before were answered or not (waiting for each would send fewer while the server is
// slow, and hide it).
const PROBES = 100
const PROBE_GAP_MS = 40
const PROBE_TIMEOUT_MS = 20_000
const ATTACKER = (i: number) => `127.0.0.${10 + (i % ADDRESSES)}`
const VICTIM = '127.0.0.250'

/** One connection of the attack: 4 pipelined pages, nothing read until `read()`, which reads for `ms` and closes. */
function attacker(port: number, localAddress: string, token: string, limit: number) {
  const socket: Socket = connect({ port, host: '127.0.0.1', localAddress })
  socket.pause()
  socket.on('error', () => {})
  const page = `GET /plants?limit=${limit} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`
  socket.write(page.repeat(PIPELINED))
  return {
    async read(ms: number): Promise<Buffer> {
      const chunks: Buffer[] = []
      socket.on('data', (chunk: Buffer) => chunks.push(chunk))
      socket.resume()
      await Promise.race([sleep(ms), new Promise((resolve) => socket.once('close', resolve))])
      socket.destroy()
      return Buffer.concat(chunks)
    },
    close: () => socket.destroy(),
  }
}

interface RawResponse {
  status: number
  head: string
  body: string
}

/** The complete responses at the start of `raw`, in order (each has Content-Length); a cut one at the end is left. */
function responses(raw: Buffer): RawResponse[] {
  const found: RawResponse[] = []
  let at = 0
  for (;;) {
    const end = raw.indexOf('\r\n\r\n', at)
    if (end === -1) return found
    const head = raw.subarray(at, end).toString('latin1')
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? NaN)
    if (!Number.isInteger(length) || end + 4 + length > raw.length) return found
    const body = raw.subarray(end + 4, end + 4 + length).toString('utf8')
    found.push({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), head, body })
    at = end + 4 + length
  }
}

/** GET /plants?limit=10 as alice, on a new connection from her address: resolves with the status and time taken. */
function probe(port: number, token: string): Promise<{ status: number; ms: number }> {
  const started = performance.now()
  return new Promise((resolve) => {
    const req = request(
      {
        port,
        host: '127.0.0.1',
        localAddress: VICTIM,
        path: '/plants?limit=10',
        agent: false,
        headers: { authorization: `Bearer ${token}` },
        timeout: PROBE_TIMEOUT_MS,
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }))
      },
    )
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }))
    req.end()
  })
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.ceil((p / 100) * sorted.length) - 1]!
}

const summary = (times: number[]) =>
  `p50 ${percentile(times, 50).toFixed(0)} ms, p99 ${percentile(times, 99).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms`

/**
 * Mallory's waves of connections asking for pages of `limit`, alice's probes among them: resolves with alice's
 * answers and mallory's connections, still unread.
 */
async function attack(
  server: ServerProcess,
  tokens: { mallory: string; alice: string },
  limit: number,
  { waves: count = WAVES, probes: probeCount = PROBES } = {},
) {
  const attackers: Array<ReturnType<typeof attacker>> = []
  const waves = (async () => {
    for (let wave = 0; wave < count; wave++) {
      for (let i = 0; i < PER_WAVE; i++) {
        attackers.push(attacker(server.port, ATTACKER(attackers.length), tokens.mallory, limit))
      }
      await sleep(WAVE_GAP_MS)
    }
  })()
  try {
    await sleep(WAVE_GAP_MS * 2)
    const probes: Array<Promise<{ status: number; ms: number }>> = []
    for (let i = 0; i < probeCount; i++) {
      probes.push(probe(server.port, tokens.alice))
      await sleep(PROBE_GAP_MS)
    }
    return { answered: await Promise.all(probes), attackers }
  } finally {
    await waves
  }
}

for (const backend of backends) {
  describe(`plantstore serve, one account's connections that read big pages slowly (${backend.name})`, () => {
    let server: ServerProcess
    let tokens: { mallory: string; alice: string }
    let dispose: () => Promise<void>
    before(async () => {
      const {
        database,
        dispose: drop,
        ...rest
      } = await bigPageDatabase(backend, { count: PAGE, name: NAME, tag: TAG, alicePlants: 10 })
      dispose = drop
      tokens = rest
      // The default limits, but for the per-token rate limit: mallory's 1,600 requests are within her account's
      // 6,000 a minute, as in the issue (which spread them over tokens).
      server = await startServer({ database, env: { PLANTSTORE_RATE_LIMIT: '0' } })
    })
    before(async () => {
      // Warm: the first pages of a fresh process run code not yet compiled, which is no one's attack.
      for (let i = 0; i < 20; i++) {
        for (const [token, limit] of [
          [tokens.mallory, PAGE],
          [tokens.alice, 10],
        ] as const) {
          const res = await fetch(`${server.baseUrl}/plants?limit=${limit}`, {
            headers: { authorization: `Bearer ${token}` },
          })
          assert.equal(res.status, 200)
          await res.arrayBuffer()
        }
      }
    })
    after(async () => {
      await server.stop('SIGKILL')
      await dispose()
    })

    test("keeps another account's GET /plants?limit=10 on new connections as fast as under the same connections asking for pages of 10, and refuses the attacker's excess pages with 429 and Retry-After", async (t) => {
      // The baseline: the same waves of connections asking for pages of 10, on this server and machine, half before
      // the attack and half after it, so that a change in what else the machine runs meets both. Without the page
      // budget alice's p99 under pages of 1,000 was 2.3 s on SQLite and 4.4 s on PostgreSQL on a shared 2-core
      // machine (0.8 s and 5 s in the issue), 20 to 40 times the baseline's 60-150 ms; with it, 0.1-0.6 s. The bound,
      // 10 times the baseline's p99 and no less than 600 ms, fails the first and grows with the load. With a CPU
      // burner on one core, the page budget alone let the attacker have 716 pages made in 5 s, and alice's p50 was
      // 0.6-1.3 s, p99 1 s or more: each account's share of a busy event loop (PageShares) keeps her at 4-6 ms, p99
      // under 100 ms. Half the waves each: mallory's requests stay within her account's 6,000 a minute.
      const half = { waves: Math.ceil(WAVES / 2), probes: PROBES / 2 }
      const before = await attack(server, tokens, 10, half)
      for (const one of before.attackers) one.close()
      const { answered, attackers } = await attack(server, tokens, PAGE)
      const read = await Promise.all(attackers.map((one) => one.read(1000)))
      // The attack's pages all finished first, or a slow build would slow its own baseline.
      const idle = /^plantstore_page_rows_in_progress 0$/m
      await eventually(async () => idle.test(await (await fetch(`${server.baseUrl}/metrics`)).text()), 30_000)
      const after = await attack(server, tokens, 10, half)
      for (const one of after.attackers) one.close()
      try {
        const baseline = [...before.answered, ...after.answered]
        const baselineTimes = baseline.map(({ ms }) => ms)
        const times = answered.map(({ ms }) => ms)
        const seen = `alice's pages under pages of 10: ${summary(baselineTimes)}; under pages of ${PAGE}: ${summary(times)}`
        t.diagnostic(seen)
        assert.deepEqual(new Set(baseline.map(({ status }) => status)), new Set([200]), seen)
        assert.deepEqual(new Set(answered.map(({ status }) => status)), new Set([200]), seen)
        assert.ok(percentile(times, 99) < Math.max(10 * percentile(baselineTimes, 99), 600), seen)

        const answers = read.flatMap(responses)
        const refused = answers.filter(({ status }) => status === 429)
        assert.ok(refused.length > 0, `the attacker got ${answers.length} answers, none 429`)
        for (const { head, body } of refused) {
          assert.match(head, /\r\nretry-after: 1\r\n/i)
          const parsed = JSON.parse(body) as { error: number; message: string }
          // Past its rows in progress (42904), or past its share of the busy loop's time (42905).
          assert.ok([42904, 42905].includes(parsed.error), body)
          assert.equal(typeof parsed.message, 'string')
        }
      } finally {
        for (const one of attackers) one.close()
      }
    })
  })
}
