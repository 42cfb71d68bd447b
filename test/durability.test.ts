import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { Agent, request } from 'node:http'
import { after, before, describe, test, type TestContext } from 'node:test'
import { backends, type TestDatabase } from './helpers/backends.js'
import { once } from './helpers/once.js'
import { cleanup, eventually, http, startServer, WAIT_MS, type ServerProcess } from './helpers/server-process.js'

// What this proves, and what it cannot. The server process is killed with SIGKILL (no shutdown code runs) while
// CLIENTS keep-alive clients keep POSTing fresh plants; after a restart on the same database every plant that got
// a 200 must be there exactly as sent, and every stored plant must be one that was sent, whole. That catches an
// answer sent before the write is committed (by the storage, or by a group commit answering ahead of its
// transaction), a batch acknowledged but dropped, and a row written half or under the wrong id.
//
// It cannot catch a missing fsync: SIGKILL ends the process, not the machine, so the OS page cache (SQLite's WAL)
// and the PostgreSQL server both survive it; a commit that reached either is kept whether or not it was flushed to
// disk. Power loss is what `synchronous=FULL` (SQLite) and PostgreSQL's default `synchronous_commit` are for, and
// no test here cuts the power. So an answer sent early is caught only when a kill lands between the answer and the
// commit's write to the WAL (SQLite) or the statement leaving the process (PostgreSQL, which finishes a statement
// it received from a client that has since died): certain when the commit waits for a timer or an fsync elsewhere,
// likely but not certain when it follows on the next turn of the event loop; hence three kills.

after(cleanup)

const TOKEN = 'durability-' + randomBytes(30).toString('base64url')
// No rate limit: the load is far above the default 600/min per token.
const ENV = { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN, PLANTSTORE_RATE_LIMIT: '0', PLANTSTORE_ACCOUNT_RATE_LIMIT: '0' }

/** Concurrent clients, each on its own keep-alive connection, each waiting for its answer before the next POST. */
const CLIENTS = 50
/** The kill comes once this many plants are acknowledged... */
const ACKED_TARGET = 500
/** ...or once LOAD_MS have passed and at least MIN_ACKED are: enough for the check to mean something. */
const MIN_ACKED = 100
const LOAD_MS = 1000
/**
 * The kill must come during the load: at least this many requests had been written in full and were still awaiting
 * their answer when it was sent (nearly all CLIENTS are, at any moment). Fewer, and the test would prove nothing.
 */
const MIN_OUTSTANDING = CLIENTS / 2

/**
 * When the kill comes, once far enough into the load. `acknowledgement`: synchronously in the handler of the first
 * 200 of a burst of answers, so if that 200 (or its batch's) went out before the commit, the commit is still pending
 * when the process dies. `write`: synchronously once a client has handed its next request to the socket, so the
 * server dies holding requests it is reading, storing or committing, that one at least (it cannot have answered in
 * the microseconds between); the rest of a batch answered just before may still reach the clients as 200s.
 */
type KillOn = 'acknowledgement' | 'write'

interface PlantBody {
  id: number
  name: string
  tag?: string
}

/** A plant only this id of this load has: its own name, and a tag on two ids in three. */
function plantFor(id: number, load: string): PlantBody {
  const name = `Durable ${load} #${id}`
  return id % 3 === 0 ? { id, name } : { id, name, tag: `t${id % 7}` }
}

/** What one load saw before and after the kill. */
interface LoadResult {
  /** Every plant whose request was started, by id. */
  sent: Map<number, PlantBody>
  /** Ids answered 200. */
  acked: Set<number>
  /** Ids whose request got no answer (a socket error once the server was gone). */
  unanswered: Set<number>
  /** Of those, the ids whose request had been handed in full to the socket before the kill. */
  cut: Set<number>
  /** Requests written in full and not yet answered when the kill was sent (some answers may have been on their way). */
  outstandingAtKill: number
  /** Milliseconds from the start of the load to the kill. */
  loadMs: number
  /** Anything but a 200 or, after the kill, a socket error: must stay empty. */
  unexpected: string[]
}

type Answer = { status: number; text: string } | Error

/** One POST on `agent`'s connection; `onWritten` runs once the whole request is handed to the socket. */
function post(agent: Agent, baseUrl: string, body: PlantBody, onWritten: () => void): Promise<Answer> {
  const payload = JSON.stringify(body)
  return new Promise((resolve) => {
    const req = request(`${baseUrl}/plants`, {
      agent,
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(payload)),
      },
      timeout: WAIT_MS,
    })
    req.once('finish', onWritten)
    req.once('timeout', () => req.destroy(new Error(`no answer within ${WAIT_MS} ms`)))
    req.once('error', resolve)
    req.once('response', (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.once('error', resolve)
      res.once('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.end(payload)
  })
}

/**
 * Runs the POST load on `server` with ids from `firstId` and sends the server process SIGKILL as `killOn` says.
 * Resolves once every client has its answer or its error.
 */
async function loadUntilKilled(server: ServerProcess, firstId: number, killOn: KillOn): Promise<LoadResult> {
  const load = randomBytes(4).toString('hex')
  const result: LoadResult = {
    sent: new Map(),
    acked: new Set(),
    unanswered: new Set(),
    cut: new Set(),
    outstandingAtKill: 0,
    unexpected: [],
    loadMs: 0,
  }
  const started = Date.now()
  let next = firstId
  let killed = false
  let armed = false
  // True from a 200 until the event loop turns: answers read together are one burst (a batch, on a group commit).
  let inBurst = false
  // Ids written in full and not answered yet.
  const awaiting = new Set<number>()
  const kill = () => {
    if (killed) return
    killed = true
    result.loadMs = Date.now() - started
    result.outstandingAtKill = awaiting.size
    // startServer spawns `node bin/plantstore.js serve` itself (no npx, no shell, one worker), so this
    // pid is the process that serves and writes, and SIGKILL leaves it no shutdown code to run.
    server.process.kill('SIGKILL')
  }
  // A safety net only: a server too slow to acknowledge MIN_ACKED plants fails the MIN_ACKED assertion.
  const deadline = setTimeout(kill, WAIT_MS)
  const farEnough = () =>
    result.acked.size >= ACKED_TARGET || (result.acked.size >= MIN_ACKED && Date.now() - started >= LOAD_MS)

  const client = async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      while (!killed) {
        const id = next++
        const body = plantFor(id, load)
        result.sent.set(id, body)
        let writtenBeforeKill = false
        const answer = await post(agent, server.baseUrl, body, () => {
          if (killed) return
          writtenBeforeKill = true
          awaiting.add(id)
          if (armed && killOn === 'write') kill()
        })
        awaiting.delete(id)
        if (answer instanceof Error) {
          result.unanswered.add(id)
          if (writtenBeforeKill) result.cut.add(id)
          if (!killed) result.unexpected.push(`id ${id}: ${answer.message} before the kill`)
          return
        }
        if (answer.status !== 200) {
          result.unexpected.push(`id ${id}: ${answer.status} ${answer.text}`)
          continue
        }
        const echoed = answer.text
        const expected = JSON.stringify({ name: body.name, ...(body.tag !== undefined && { tag: body.tag }) })
        if (echoed !== expected) result.unexpected.push(`id ${id}: answered ${echoed}, expected ${expected}`)
        result.acked.add(id)
        const firstOfBurst = !inBurst
        if (firstOfBurst) {
          inBurst = true
          setImmediate(() => (inBurst = false))
        }
        if (!armed) armed = farEnough()
        // The first 200 of a burst: the server is likely still answering the rest of its batch, before any commit
        // it wrongly put after the answers.
        if (armed && killOn === 'acknowledgement' && firstOfBurst) kill()
      }
    } finally {
      agent.destroy()
    }
  }
  try {
    await Promise.all(Array.from({ length: CLIENTS }, client))
  } finally {
    clearTimeout(deadline)
  }
  assert.equal(await server.stop('SIGKILL'), null)
  assert.equal(server.process.signalCode, 'SIGKILL', 'the server died of the kill, not of something else')
  return result
}

/** The kill came after enough acknowledgements, during the load, and nothing else went wrong. */
function assertKilledMidLoad(t: TestContext, result: LoadResult, killOn: KillOn): void {
  const summary =
    `after ${result.loadMs} ms of load: sent ${result.sent.size}, acknowledged ${result.acked.size}, ` +
    `${result.outstandingAtKill} awaiting an answer at the kill, ${result.unanswered.size} never answered ` +
    `(${result.cut.size} of them written in full before the kill)`
  t.diagnostic(summary)
  assert.deepEqual(result.unexpected, [], summary)
  assert.ok(result.acked.size >= MIN_ACKED, `at least ${MIN_ACKED} acknowledged: ${summary}`)
  const duringLoad = `at least ${MIN_OUTSTANDING} requests awaiting their answer at the kill: ${summary}`
  assert.ok(result.outstandingAtKill >= MIN_OUTSTANDING, duringLoad)
  // A kill on a 200 is about that 200: a server answering all its clients in one batch may have none left to cut.
  if (killOn === 'write') assert.ok(result.cut.size >= 1, `the kill cut the request just written: ${summary}`)
  assert.equal(result.acked.size + result.unanswered.size, result.sent.size, summary)
}

/** Every plant of the token's account, read through `server` page by page along the Link header. */
async function storedPlants(server: ServerProcess): Promise<Map<number, PlantBody>> {
  const stored = new Map<number, PlantBody>()
  let path: string | undefined = '/plants?limit=1000&fields=id,name,tag'
  while (path !== undefined) {
    const res = await http(server.baseUrl, 'GET', path, { token: TOKEN })
    assert.equal(res.status, 200, res.text)
    for (const plant of JSON.parse(res.text) as PlantBody[]) {
      assert.ok(!stored.has(plant.id), `id ${plant.id} listed twice`)
      stored.set(plant.id, plant)
    }
    const link = res.headers.get('link')
    path = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
    assert.ok(link === null || path !== undefined, `a Link header to follow: ${link}`)
  }
  return stored
}

/** After the restart: acknowledged ⊆ stored ⊆ sent, each stored plant exactly as sent. */
function assertDurable(t: TestContext, stored: Map<number, PlantBody>, loads: LoadResult[]): void {
  const acked = loads.reduce((n, load) => n + load.acked.size, 0)
  const sent = loads.reduce((n, load) => n + load.sent.size, 0)
  const storedUnanswered = loads.reduce((n, load) => n + [...load.unanswered].filter((id) => stored.has(id)).length, 0)
  t.diagnostic(`stored ${stored.size}: ${acked} acknowledged, ${storedUnanswered} of the unanswered; ${sent} sent`)

  const lost = loads.map((load) => [...load.acked].filter((id) => !stored.has(id)))
  const missing = lost.map((ids, i) => `${ids.length} of load ${i + 1}`).join(', ')
  assert.deepEqual(lost.flat(), [], `acknowledged plants missing after the restart: ${missing}`)
  for (const load of loads) for (const id of load.acked) assert.deepEqual(stored.get(id), load.sent.get(id))

  for (const [id, plant] of stored) {
    const sentAs = loads.find((load) => load.sent.has(id))?.sent.get(id)
    assert.ok(sentAs !== undefined, `stored id ${id} was never sent`)
    assert.deepEqual(plant, sentAs, `stored id ${id} is not the plant sent`)
  }
  assert.ok(stored.size >= acked, `stored ${stored.size} < acknowledged ${acked}`)
  assert.ok(stored.size <= sent, `stored ${stored.size} > sent ${sent}`)
}

for (const backend of backends) {
  describe(`plantstore serve on ${backend.name}, killed with SIGKILL during a POST load`, () => {
    let database: TestDatabase
    const loads: LoadResult[] = []

    /** Starts the server on the database and waits until the token is accepted (it is seeded after listening). */
    async function start(): Promise<ServerProcess> {
      const server = await startServer({ database: database.url, env: ENV })
      await eventually(
        async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200,
        10_000,
      )
      return server
    }

    /** The server the next kill is for: each restart is checked, then loaded and killed again. */
    let server: ServerProcess | undefined

    before(async () => {
      database = await backend.createDatabase()
    })
    after(async () => {
      await cleanup()
      await database?.dispose()
    })

    // One database, killed three times: a restart after a kill must recover it fully, not only a fresh store. Each
    // kill is another chance to land in the window between an answer and a commit wrongly put after it.
    const kills: { killOn: KillOn; title: string }[] = [
      {
        killOn: 'acknowledgement',
        title: 'killed right after a 200, then restarted, it has every plant answered 200 as sent and only plants sent',
      },
      {
        killOn: 'write',
        title: 'killed again just after clients sent requests, it still has every plant either load had answered 200',
      },
      {
        killOn: 'acknowledgement',
        title: 'killed a third time right after a 200, it still has every plant any load had answered 200',
      },
    ]
    // A round loads and kills the server the round before restarted: each runs once, in its test or first in a later
    // round's, so any test run alone (--test-name-pattern) comes after the kills it builds on.
    const rounds: (() => Promise<{ result: LoadResult; loads: LoadResult[]; stored: Map<number, PlantBody> }>)[] = []
    kills.forEach(({ killOn }, round) => {
      rounds.push(
        once(async () => {
          if (round > 0) await rounds[round - 1]!()
          const result = await loadUntilKilled(server ?? (await start()), 1 + round * 1_000_000, killOn)
          loads.push(result)
          server = await start()
          return { result, loads: [...loads], stored: await storedPlants(server) }
        }),
      )
    })
    kills.forEach(({ killOn, title }, round) => {
      test(title, async (t) => {
        const { result, loads: upToThisRound, stored } = await rounds[round]!()
        assertKilledMidLoad(t, result, killOn)
        assertDurable(t, stored, upToThisRound)
      })
    })
  })
}
