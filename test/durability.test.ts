import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { Agent, request } from 'node:http'
import { after, before, describe, test, type TestContext } from 'node:test'
import { backends, type TestDatabase } from './helpers/backends.js'
import { cleanup, eventually, http, startServer, WAIT_MS, type ServerProcess } from './helpers/server-process.js'

// What this proves, and what it cannot. The server process is killed with SIGKILL (no shutdown code runs) while
// CLIENTS keep-alive clients keep POSTing fresh plants; after a restart on the same database every plant that got
// a 200 must be there exactly as sent, and every stored plant must be one that was sent, whole. That catches an
// answer sent before the write is committed (by the storage, or by a group commit answering ahead of its
// transaction), a batch acknowledged but dropped, and a row written half or under the wrong id. It cannot catch a
// missing fsync: SIGKILL ends the process, not the machine, so the OS page cache (SQLite's WAL) and the PostgreSQL
// server both survive it; a commit that reached either is kept whether or not it was flushed to disk. Power loss is
// what `synchronous=FULL` (SQLite) and PostgreSQL's default `synchronous_commit` are for, and no test here cuts it.
// For the same reason, on PostgreSQL only an answer sent before the commit was even sent to the database can lose
// a plant here; PostgreSQL finishes a statement it received from a client that has since died.

after(cleanup)

const TOKEN = 'durability-' + randomBytes(30).toString('base64url')
// No rate limit: the load is far above the default 600/min per token.
const ENV = { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN, PLANTSTORE_RATE_LIMIT: '0' }

/** Concurrent clients, each on its own keep-alive connection, each waiting for its answer before the next POST. */
const CLIENTS = 50
/** The kill comes on the answer that brings the acknowledged plants to this many... */
const ACKED_TARGET = 500
/** ...or on the first answer after LOAD_MS once at least MIN_ACKED were acknowledged: enough to have proved much. */
const MIN_ACKED = 100
const LOAD_MS = 1000
/**
 * The kill must cut the load: at least this many requests had been written in full to the server and were never
 * answered (with CLIENTS waiting on their answers, nearly all of them are). Fewer, and the test proved nothing.
 */
const MIN_CUT = CLIENTS / 2

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
 * Runs the POST load on `server` with ids from `firstId` and sends the server process SIGKILL from inside the
 * handler of an acknowledgement, so the kill lands right after a 200: if that 200 went out before its commit, the
 * commit is still pending when the process dies. Resolves once every client has its answer or its error.
 */
async function loadUntilKilled(server: ServerProcess, firstId: number): Promise<LoadResult> {
  const load = randomBytes(4).toString('hex')
  const result: LoadResult = {
    sent: new Map(),
    acked: new Set(),
    unanswered: new Set(),
    cut: new Set(),
    unexpected: [],
    loadMs: 0,
  }
  const started = Date.now()
  let next = firstId
  let killed = false
  const kill = () => {
    if (killed) return
    killed = true
    result.loadMs = Date.now() - started
    // startServer spawns `node --import tsx src/cli/main.ts serve` itself (no npx, no shell, one worker), so this
    // pid is the process that serves and writes, and SIGKILL leaves it no shutdown code to run.
    server.process.kill('SIGKILL')
  }
  // A safety net only: a server too slow to acknowledge MIN_ACKED plants fails the MIN_ACKED assertion.
  const deadline = setTimeout(kill, WAIT_MS)

  const client = async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      while (!killed) {
        const id = next++
        const body = plantFor(id, load)
        result.sent.set(id, body)
        let writtenBeforeKill = false
        const answer = await post(agent, server.baseUrl, body, () => (writtenBeforeKill = !killed))
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
        const elapsed = Date.now() - started
        if (result.acked.size >= ACKED_TARGET || (result.acked.size >= MIN_ACKED && elapsed >= LOAD_MS)) kill()
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

/** The load was really cut by the kill, after enough acknowledgements, and nothing else went wrong. */
function assertKilledMidLoad(t: TestContext, result: LoadResult): void {
  const summary = `sent ${result.sent.size}, acknowledged ${result.acked.size}, unanswered ${result.unanswered.size} (${result.cut.size} written in full before the kill) after ${result.loadMs} ms of load`
  t.diagnostic(summary)
  assert.deepEqual(result.unexpected, [], summary)
  assert.ok(result.acked.size >= MIN_ACKED, `at least ${MIN_ACKED} acknowledged: ${summary}`)
  assert.ok(result.cut.size >= MIN_CUT, `the kill cut at least ${MIN_CUT} requests in flight: ${summary}`)
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

  const lost = loads.flatMap((load) => [...load.acked].filter((id) => !stored.has(id)))
  assert.deepEqual(lost, [], `${lost.length} acknowledged plants missing after the restart`)
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

    before(async () => {
      database = await backend.createDatabase()
    })
    after(async () => {
      await cleanup()
      await database?.dispose()
    })

    test('after a restart, every plant answered 200 before the kill is stored as sent, and every stored plant is one sent', async (t) => {
      const result = await loadUntilKilled(await start(), 1)
      assertKilledMidLoad(t, result)
      loads.push(result)

      const restarted = await start()
      assertDurable(t, await storedPlants(restarted), loads)
      await restarted.stop()
    })

    test('killed again during a load on the restarted server, it still keeps every plant acknowledged by either load', async (t) => {
      assert.equal(loads.length, 1, 'runs after the first kill')
      const result = await loadUntilKilled(await start(), 1_000_001)
      assertKilledMidLoad(t, result)
      loads.push(result)

      const restarted = await start()
      assertDurable(t, await storedPlants(restarted), loads)
      await restarted.stop()
    })
  })
}
