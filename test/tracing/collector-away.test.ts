import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { startOtlpReceiver } from '../helpers/otlp-receiver.js'
import { cleanup, eventually, http, startServer, type ServerProcess } from '../helpers/server-process.js'

// The exports and the stop's flush do not touch the store: what is said and how long a stop takes are the same on
// either backend, so these run on SQLite alone.
after(cleanup)

const token = 'pst_' + randomBytes(32).toString('base64url')
// Longer than the grace period below: the flush must not be counted in it.
const FLUSH_MS = 1500

/** The JSON log lines a server wrote whose message matches `pattern`. */
function lines(server: ServerProcess, pattern: RegExp): Array<Record<string, unknown>> {
  return server.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => pattern.test(String(line.msg)))
}

/** A server with `env`, ready, after a few requests that leave spans to send. */
async function servedRequests(env: Record<string, string>): Promise<ServerProcess> {
  const server = await startServer({ env: { PLANTSTORE_BOOTSTRAP_TOKEN: token, ...env } })
  await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token })).status === 200, 10_000)
  for (let i = 0; i < 3; i++) assert.equal((await http(server.baseUrl, 'GET', '/plants', { token })).status, 200)
  return server
}

/** Stops `server` with SIGTERM: its exit code and how long it took. */
async function timedStop(server: ServerProcess): Promise<{ code: number | null; ms: number }> {
  const start = performance.now()
  const code = await server.stop()
  return { code, ms: performance.now() - start }
}

describe('a trace collector that hangs or refuses, at stop', () => {
  let hanging: Server
  let baselineMs: number
  before(async () => {
    // Takes the connection, reads the export, never answers.
    hanging = createServer(() => {})
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve))
    const untraced = await servedRequests({})
    const stopped = await timedStop(untraced)
    assert.equal(stopped.code, 0, untraced.stdout)
    baselineMs = stopped.ms
  })
  after(() => {
    hanging?.closeAllConnections()
    hanging?.close()
  })

  const collectors: Array<[string, () => Promise<string>]> = [
    ['hangs', async () => `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`],
    [
      'refuses',
      async () => {
        const gone = await startOtlpReceiver()
        await gone.close()
        return gone.url
      },
    ],
  ]
  for (const [behaviour, collector] of collectors) {
    test(`a collector that ${behaviour}: the stop drops the buffered spans with one warning after the flush bound, and exits 0`, async (t) => {
      const server = await servedRequests({
        OTEL_EXPORTER_OTLP_ENDPOINT: await collector(),
        // Nothing is exported before the stop: its flush has every span to send.
        OTEL_BSP_SCHEDULE_DELAY: '600000',
        SHUTDOWN_GRACE_SECONDS: '1',
        SHUTDOWN_TRACE_FLUSH_MS: String(FLUSH_MS),
      })
      const { code, ms } = await timedStop(server)
      t.diagnostic(`stop took ${Math.round(ms)} ms; without tracing ${Math.round(baselineMs)} ms`)
      const output = `stdout:\n${server.stdout}\nstderr:\n${server.stderr}`
      assert.equal(code, 0, output)
      const dropped = lines(server, /spans dropped at stop/)
      assert.equal(dropped.length, 1, output)
      assert.equal(dropped[0]!.level, 40)
      assert.ok(Number(dropped[0]!.droppedSpans) > 0, output)
      assert.deepEqual(lines(server, /shutdown failed|grace period over/), [])
      assert.doesNotMatch(server.stdout + server.stderr, /"stack"|\n\s+at /, output)
      // The flush bound, then the rest of the stop: about as long as a stop without tracing, twice that for slack.
      assert.ok(
        ms < FLUSH_MS + 3 * baselineMs,
        `stop took ${Math.round(ms)} ms; without tracing ${Math.round(baselineMs)} ms`,
      )
    })
  }
})

test('exports failing while serving are told once when they start failing and once when they work again', async () => {
  const receiver = await startOtlpReceiver()
  receiver.failWith = 500
  const server = await servedRequests({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '10',
  })
  try {
    // Each request's spans go in an export of their own, a few milliseconds later.
    const request = async () => assert.equal((await http(server.baseUrl, 'GET', '/plants', { token })).status, 200)
    await eventually(async () => (await request(), receiver.refused >= 5), 10_000, 20)
    await server.settle()
    assert.equal(lines(server, /trace export failing/).length, 1, server.stdout)
    assert.equal(lines(server, /trace export failing/)[0]!.level, 40)
    receiver.failWith = undefined
    const received = receiver.spans.length
    await eventually(async () => (await request(), receiver.spans.length >= received + 5), 10_000, 20)
    await server.settle()
    const recovered = lines(server, /trace export working again/)
    assert.equal(recovered.length, 1, server.stdout)
    assert.ok(Number(recovered[0]!.failedExports) >= 5, JSON.stringify(recovered[0]))
    assert.equal(lines(server, /trace export failing/).length, 1, server.stdout)
  } finally {
    await server.stop()
    await receiver.close()
  }
})
