import assert from 'node:assert/strict'
import { request } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import { issueToken } from '../../src/auth/issue-token.js'
import { PageBudget } from '../../src/plugins/page-budget.js'
import { MAX_IN_FLIGHT_PER_CONNECTION } from '../../src/plugins/pipelining.js'
import { backends } from '../helpers/backends.js'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { fillPlants } from '../helpers/big-pages.js'

const PAGE = 1000
// The issue's eight accounts holding the process bound (8 × 1,000 rows), scaled down: three accounts and a process
// bound of three pages, each account at its own bound of one page.
const ATTACKERS = 3
// About 330 bytes a plant: a page of 1,000 is 330 KB, and the 16 pages one connection may pipeline (5 MB) are more
// than loopback's buffers take from a client that reads nothing (about 4 MB here), so one page stays unsent.
const NAME = 'n'.repeat(200)
const TAG = 't'.repeat(100)
// Alice's probes, one after another: quiet, then under the attack (a number that takes less than the write stall
// timeout of 30 s even when each waits a second and is refused, as before the fix).
const QUIET_PROBES = 50
const ATTACKED_PROBES = 25

/** A connection pipelining as many pages of 1,000 as one connection may, reading nothing until it is closed. */
function unreadPages(port: number, token: string): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1' })
  socket.pause()
  socket.on('error', () => {})
  const page = `GET /plants?limit=${PAGE} HTTP/1.1\r\nHost: x\r\n${`Authorization: Bearer ${token}`}\r\n\r\n`
  return new Promise((resolve) =>
    socket.once('connect', () => {
      socket.write(page.repeat(MAX_IN_FLIGHT_PER_CONNECTION))
      resolve(socket)
    }),
  )
}

/** GET /plants?limit=10 on a new connection: the status and the time taken to the end of the answer. */
function probe(port: number, token: string): Promise<{ status: number; ms: number }> {
  const started = performance.now()
  return new Promise((resolve) => {
    const options = { port, host: '127.0.0.1', path: '/plants?limit=10', agent: false, headers: bearer(token) }
    const req = request(options, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }))
    })
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }))
    req.end()
  })
}

/** `count` probes one after another. */
async function probes(port: number, token: string, count: number): Promise<Array<{ status: number; ms: number }>> {
  const answers = []
  for (let i = 0; i < count; i++) answers.push(await probe(port, token))
  return answers
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.ceil((p / 100) * values.length) - 1]!

/** Resolves once `check` holds, polling; fails after 20 s, which only a hang takes. */
async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (const started = Date.now(); !(await check()); await sleep(5)) {
    if (Date.now() - started > 20_000) assert.fail(`${what} within 20 s`)
  }
}

describe('PageBudget, pages set aside while their clients do not read', () => {
  test("takes a page set aside out of the process bound, keeping it against its account's, until it is given back", () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 1000 })
    assert.equal(budget.take(1, 1000), undefined)
    assert.equal(budget.take(2, 10), 'process')
    const page = budget.setAside(1, 1000, () => assert.fail('closed under the bound'))
    assert.equal(budget.take(2, 10), undefined, 'another account is admitted')
    assert.equal(budget.take(1, 10), 'account', 'the account still holds its rows')
    assert.deepEqual([budget.inProgress(), budget.inProgress(1), budget.unread()], [1010, 1000, 1000])
    budget.giveBack(1, 1000, page)
    assert.deepEqual([budget.inProgress(), budget.inProgress(1), budget.unread()], [10, 0, 0])
  })

  test('lets waiting pages try again when rows are set aside', () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 1000 })
    budget.take(1, 1000)
    let tried = 0
    budget.wait(2, () => tried++)
    budget.setAside(1, 1000, () => {})
    assert.equal(tried, 1)
  })

  test('closes the page set aside longest once pages set aside pass the process bound, its rows out at once', () => {
    const budget = new PageBudget({ perAccount: 600, perProcess: 1000 })
    const closed: number[] = []
    const pages = [1, 2, 3].map((account) => {
      assert.equal(budget.take(account, 500), undefined)
      return budget.setAside(account, 500, () => closed.push(account))
    })
    assert.deepEqual(closed, [1], 'the first set aside, to keep 1,000 rows set aside')
    assert.equal(budget.unread(), 1000)
    // Its connection's close gives its account's rows back; those set aside are not counted out twice.
    budget.giveBack(1, 500, pages[0])
    assert.deepEqual([budget.inProgress(), budget.inProgress(1), budget.unread()], [1000, 0, 1000])
  })

  test("closes the pages of the account with the most set aside before a slow reader's one page", () => {
    const budget = new PageBudget({ perAccount: 1000, perProcess: 1000 })
    const closed: string[] = []
    const aside = (account: number, name: string, rows: number) => {
      assert.equal(budget.take(account, rows), undefined)
      budget.setAside(account, rows, () => closed.push(name))
    }
    aside(1, 'slow reader', 200)
    for (let i = 1; i <= 4; i++) aside(2, `hoarder ${i}`, 200)
    assert.deepEqual(closed, [])
    aside(2, 'hoarder 5', 200)
    aside(3, 'another reader', 200)
    assert.deepEqual(closed, ['hoarder 1', 'hoarder 2'], "the hoarder's oldest, not the reader set aside first")
    assert.equal(budget.unread(), 1000)
  })
})

for (const backend of backends) {
  describe(`GET /plants while other accounts leave their big pages unread (${backend.name})`, () => {
    let t: TestApp
    let port: number
    const attackers: string[] = []
    let alice: string
    // The server's side of each connection, by the client's port: the test sees when its output stops leaving.
    const served = new Map<number, Socket>()
    before(async () => {
      t = await buildTestApp(backend, 2000, undefined, {
        pageBudget: { perAccount: PAGE, perProcess: ATTACKERS * PAGE },
      })
      for (let i = 0; i < ATTACKERS; i++) {
        const { secret, token } = await issueToken(t.storage, { accountName: `mallory${i}` })
        await fillPlants(t.storage, token.accountId, { count: PAGE, name: NAME, tag: TAG })
        attackers.push(secret)
      }
      const victim = await issueToken(t.storage, { accountName: 'alice' })
      await fillPlants(t.storage, victim.token.accountId, { count: 10, name: 'fern', tag: null })
      alice = victim.secret
      t.app.server.on('connection', (socket: Socket) => served.set(socket.remotePort!, socket))
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      port = (t.app.server.address() as AddressInfo).port
      // Warm: the first pages of a fresh app run code not yet compiled, which is no one's attack.
      for (let i = 0; i < 5; i++) {
        for (const token of [...attackers, alice]) {
          const res = await fetch(`http://127.0.0.1:${port}/plants?limit=${PAGE}`, { headers: bearer(token) })
          await res.arrayBuffer()
        }
      }
    })
    after(() => t.close())

    /** The gauge `name` of /metrics. */
    const gauge = async (name: string) => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body
      return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1])
    }

    test("serves another account's GET /plants?limit=10 with 200, about as fast as when quiet, while accounts holding the whole process bound leave their pages unread", async (ctx) => {
      const quiet = await probes(port, alice, QUIET_PROBES)
      const sockets = await Promise.all(attackers.map((token) => unreadPages(port, token)))
      try {
        const stuck = () => sockets.every((socket) => (served.get(socket.localPort!)?.writableLength ?? 0) > 0)
        await until(stuck, "each attacker's connection with output that no longer leaves")
        const held = ATTACKERS * PAGE
        assert.equal(await gauge('plantstore_page_rows_in_progress'), held, 'the attack holds every row of the process')
        // The first page after the attack's pages stopped leaving may wait for them to be set aside; then none waits.
        const first = await probe(port, alice)
        const attacked = await probes(port, alice, ATTACKED_PROBES)
        const quietP99 = percentile(
          quiet.map(({ ms }) => ms),
          99,
        )
        const p99 = percentile(
          attacked.map(({ ms }) => ms),
          99,
        )
        const refused = attacked.filter(({ status }) => status !== 200).length
        const seen = `alice's GET /plants?limit=10: p99 ${quietP99.toFixed(1)} ms quiet, ${p99.toFixed(1)} ms under the attack (${refused} of ${ATTACKED_PROBES} not 200; the first after the pages stopped leaving ${first.status} in ${first.ms.toFixed(0)} ms)`
        ctx.diagnostic(seen)
        assert.ok(stuck(), 'the attack was still in force')
        assert.equal(first.status, 200, seen)
        assert.deepEqual(new Set([...quiet, ...attacked].map(({ status }) => status)), new Set([200]), seen)
        assert.ok(p99 < 10 * quietP99, seen)
      } finally {
        for (const socket of sockets) socket.destroy()
      }
    })
  })
}
