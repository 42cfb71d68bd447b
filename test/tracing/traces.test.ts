import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, test } from 'node:test'
import { backends, type TestBackend, type TestDatabase } from '../helpers/backends.js'
import { startOtlpReceiver } from '../helpers/otlp-receiver.js'
import { startReceiver } from '../helpers/receiver.js'
import {
  cleanup,
  eventually,
  http,
  runCli,
  startServer,
  tempDir,
  type ServerProcess,
} from '../helpers/server-process.js'

after(cleanup)

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c'
const PARENT_ID = 'b7ad6b7169203331'

const PROTOCOLS = [
  ['http/json', 'application/json'],
  ['http/protobuf', 'application/x-protobuf'],
] as const

for (const backend of backends)
  for (const [protocol, contentType] of PROTOCOLS) {
    describe(`traces over OTLP/HTTP, ${protocol} (${backend.name})`, () => {
      let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>
      let database: TestDatabase
      let server: ServerProcess
      const token = 'pst_' + randomBytes(32).toString('base64url')
      before(async () => {
        receiver = await startOtlpReceiver()
        database = await backend.createDatabase()
        server = await startServer({
          database: database.url,
          env: {
            PLANTSTORE_BOOTSTRAP_TOKEN: token,
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
            OTEL_SERVICE_NAME: 'plantstore-under-test',
            PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
            OTEL_BSP_SCHEDULE_DELAY: '100',
          },
        })
        await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token })).status === 200, 10_000)
      })
      after(async () => {
        await server?.stop()
        await database?.dispose()
        await receiver?.close()
      })

      test("continues the caller's traceparent: the request's SERVER span, its storage spans, service.name", async () => {
        const traceparent = `00-${TRACE_ID}-${PARENT_ID}-01`
        const created = await http(server.baseUrl, 'POST', '/plants', {
          token,
          body: { id: 7, name: 'Secret Fern', tag: 'private-tag' },
          headers: { traceparent, 'x-request-id': 'trace-test-1' },
        })
        assert.equal(created.status, 200, created.text)
        await eventually(async () => receiver.spans.some((s) => s.traceId === TRACE_ID && s.kind === 2), 10_000, 50)
        const request = receiver.spans.find((s) => s.traceId === TRACE_ID && s.kind === 2)!
        assert.equal(request.parentSpanId, PARENT_ID)
        assert.equal(request.name, 'POST /plants')
        assert.equal(request.attributes['http.route'], '/plants')
        assert.equal(request.attributes['http.response.status_code'], 200)
        assert.equal(request.attributes['plantstore.request_id'], 'trace-test-1')
        assert.equal(request.resource['service.name'], 'plantstore-under-test')
        assert.ok(
          receiver.contentTypes.every((type) => type.startsWith(contentType)),
          receiver.contentTypes.join(),
        )
        await eventually(async () => receiver.spans.some((s) => s.name === 'createPlant'), 10_000, 50)
        const storage = receiver.spans.find((s) => s.name === 'createPlant')!
        assert.equal(storage.traceId, TRACE_ID)
        assert.equal(storage.kind, 3, 'CLIENT')
        assert.equal(storage.attributes['db.system.name'], backend.name === 'sqlite' ? 'sqlite' : 'postgresql')
        assert.equal(storage.attributes['db.operation.name'], 'createPlant')
      })

      test("writes its SERVER span's trace_id and span_id on a request's log line, and on no line outside one", async () => {
        const traceId = 'c0ffee00'.repeat(4)
        const listed = await http(server.baseUrl, 'GET', '/plants', {
          token,
          headers: { traceparent: `00-${traceId}-${PARENT_ID}-01`, 'x-request-id': 'trace-log-1' },
        })
        assert.equal(listed.status, 200, listed.text)
        await eventually(async () => receiver.spans.some((s) => s.traceId === traceId && s.kind === 2), 10_000, 50)
        const span = receiver.spans.find((s) => s.traceId === traceId && s.kind === 2)!
        await server.settle()
        const lines = server.stdout
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>)
        const line = lines.find((l) => l.reqId === 'trace-log-1')
        assert.ok(line, server.stdout)
        assert.equal(line.trace_id, traceId)
        assert.equal(line.span_id, span.spanId)
        assert.ok(lines.some((l) => typeof l.reqId === 'string' && l.reqId !== 'trace-log-1' && l.trace_id !== traceId))
        for (const l of lines) assert.equal('trace_id' in l, 'reqId' in l, JSON.stringify(l))
      })

      test("delivers the webhook a POST causes in that POST's trace: a CLIENT span, and traceparent to the receiver", async () => {
        const hooks = await startReceiver()
        try {
          const url = `${hooks.url}/hook?key=receiver-secret`
          const add = ['webhooks', 'add', '--account', 'default', '--url', url, '--database', database.url]
          const added = await runCli(add, { PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true' })
          assert.equal(added.code, 0, added.stderr)
          const traceId = 'feedface'.repeat(4)
          const traceparent = `00-${traceId}-${PARENT_ID}-01`
          const created = await http(server.baseUrl, 'POST', '/plants', {
            token,
            body: { id: 8, name: 'Hooked' },
            headers: { traceparent },
          })
          assert.equal(created.status, 200, created.text)
          const [delivery] = await hooks.waitFor(1, 15_000)
          assert.match(String(delivery!.headers.traceparent), new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`))
          await eventually(async () => receiver.spans.some((s) => s.name === 'webhook plant.created'), 10_000, 50)
          const span = receiver.spans.find((s) => s.name === 'webhook plant.created')!
          assert.equal(span.traceId, traceId)
          assert.equal(span.kind, 3, 'CLIENT')
          assert.equal(
            String(delivery!.headers.traceparent).split('-')[2],
            span.spanId,
            'the receiver continues the span',
          )
          assert.equal(span.attributes['http.response.status_code'], 200)
          const everything = Buffer.concat(receiver.bodies)
          assert.equal(everything.includes('receiver-secret'), false, 'the URL is not recorded')
          // The subscription's signing secret (printed first by webhooks add), its key, and the attempt's signature.
          const secret = added.stdout.split('\n')[0]!.trim()
          assert.match(secret, /^whsec_/)
          const signature = String(delivery!.headers['webhook-signature']).replace(/^v1,/, '')
          assert.match(signature, /^[A-Za-z0-9+/]{43}=$/)
          for (const value of [secret, secret.slice('whsec_'.length), signature, 'Hooked']) {
            assert.equal(everything.includes(value), false, `a span carries ${value.slice(0, 12)}…`)
          }
        } finally {
          await hooks.close()
        }
      })

      test("delivers an event another instance wrote in the trace of that instance's request", async () => {
        const hooks = await startReceiver()
        // Writes events and delivers none: the suite's server, on the same database, delivers them.
        const writer = await startServer({
          database: database.url,
          env: {
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
            OTEL_SERVICE_NAME: 'plantstore-writer',
            OTEL_BSP_SCHEDULE_DELAY: '100',
            PLANTSTORE_WEBHOOK_DELIVERY: 'false',
          },
        })
        try {
          const add = [
            'webhooks',
            'add',
            '--account',
            'default',
            '--url',
            `${hooks.url}/other`,
            '--database',
            database.url,
          ]
          assert.equal((await runCli(add, { PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true' })).code, 0)
          const traceId = 'abad1dea'.repeat(4)
          const created = await http(writer.baseUrl, 'POST', '/plants', {
            token,
            body: { id: 9, name: 'Elsewhere' },
            headers: { traceparent: `00-${traceId}-${PARENT_ID}-01` },
          })
          assert.equal(created.status, 200, created.text)
          const [delivery] = await hooks.waitFor(1, 15_000)
          assert.match(String(delivery!.headers.traceparent), new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`))
          const attempt = (s: (typeof receiver.spans)[number]) =>
            s.name === 'webhook plant.created' && s.traceId === traceId
          await eventually(async () => receiver.spans.some(attempt), 10_000, 50)
          assert.equal(receiver.spans.find(attempt)!.resource['service.name'], 'plantstore-under-test')
          const request = receiver.spans.find((s) => s.traceId === traceId && s.kind === 2)
          assert.equal(request?.resource['service.name'], 'plantstore-writer')
        } finally {
          await writer.stop()
          await hooks.close()
        }
      })

      test('puts neither the bearer token nor plant text in any span: the path goes without its query', async () => {
        // Plant text of this test's own, posted and then filtered on, both traced down to their storage spans.
        const own = randomBytes(6).toString('hex')
        const [name, tag] = [`Secret Fern ${own}`, `private-tag-${own}`]
        const [postTrace, listTrace] = ['5ec2e7f0'.repeat(3) + own.slice(0, 8), '7a90f11e'.repeat(3) + own.slice(4)]
        const created = await http(server.baseUrl, 'POST', '/plants', {
          token,
          body: { id: 10, name, tag },
          headers: { traceparent: `00-${postTrace}-${PARENT_ID}-01` },
        })
        assert.equal(created.status, 200, created.text)
        const listed = await http(server.baseUrl, 'GET', `/plants?tag=${tag}`, {
          token,
          headers: { traceparent: `00-${listTrace}-${PARENT_ID}-01`, 'x-request-id': 'trace-test-2' },
        })
        assert.equal(listed.status, 200)
        assert.deepEqual(
          (JSON.parse(listed.text) as Array<{ name: string }>).map((plant) => plant.name),
          [name],
          'the filter found the plant',
        )
        const arrived = (traceId: string, spanName: string) =>
          receiver.spans.some((s) => s.traceId === traceId && s.name === spanName)
        await eventually(
          async () =>
            arrived(postTrace, 'POST /plants') &&
            arrived(postTrace, 'createPlant') &&
            arrived(listTrace, 'GET /plants') &&
            arrived(listTrace, 'listPlants'),
          10_000,
          50,
        )
        const span = receiver.spans.find((s) => s.attributes['plantstore.request_id'] === 'trace-test-2')!
        assert.equal(span.attributes['url.path'], '/plants')
        const everything = Buffer.concat(receiver.bodies)
        for (const secret of [token, token.slice(4), name, tag]) {
          assert.equal(everything.includes(secret), false, `a span carries ${secret === token ? 'the token' : secret}`)
        }
      })
    })
  }

/**
 * Runs `run` against a server on a fresh database of `backend`, started with `env` and a bootstrap token and ready,
 * then stops it (`signal`) and drops the database.
 */
async function withServer(
  backend: TestBackend,
  env: Record<string, string>,
  run: (server: ServerProcess, token: string) => Promise<void>,
  signal?: NodeJS.Signals,
): Promise<void> {
  const database = await backend.createDatabase()
  const token = 'pst_' + randomBytes(32).toString('base64url')
  const server = await startServer({ database: database.url, env: { PLANTSTORE_BOOTSTRAP_TOKEN: token, ...env } })
  try {
    await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token })).status === 200, 10_000)
    await run(server, token)
  } finally {
    await server.stop(signal)
    await database.dispose()
  }
}

/** POSTs plants 1..count, each answered 200. */
async function createPlants(server: ServerProcess, token: string, count: number): Promise<void> {
  for (let id = 1; id <= count; id++) {
    const created = await http(server.baseUrl, 'POST', '/plants', { token, body: { id, name: `p${id}` } })
    assert.equal(created.status, 200, created.text)
  }
}

for (const backend of backends) {
  describe(`tracing at the edges (${backend.name})`, () => {
    test('a collector that refuses connections changes no answer', async () => {
      const refusing = await startOtlpReceiver()
      await refusing.close()
      // A second to give up on each export: the stop's last flush would otherwise retry until its bound (2 s).
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: refusing.url,
        OTEL_BSP_SCHEDULE_DELAY: '10',
        OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      }
      await withServer(backend, env, async (server, token) => {
        await createPlants(server, token, 20)
        const listed = await http(server.baseUrl, 'GET', '/plants?limit=100', { token })
        assert.equal(JSON.parse(listed.text).length, 20)
        assert.equal((await http(server.baseUrl, 'GET', '/plants/404', { token })).status, 404)
      })
    })

    test('a collector that never answers costs spans, counted in /metrics, and no request its answer', async () => {
      const hanging = createServer(() => {})
      await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve))
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`,
        OTEL_BSP_MAX_QUEUE_SIZE: '8',
        OTEL_BSP_SCHEDULE_DELAY: '10',
      }
      try {
        await withServer(
          backend,
          env,
          async (server, token) => {
            await createPlants(server, token, 30)
            const metrics = (await http(server.baseUrl, 'GET', '/metrics')).text
            const dropped = /^plantstore_trace_spans_dropped_total (\d+)$/m.exec(metrics)
            assert.ok(dropped && Number(dropped[1]) > 0, metrics.match(/^plantstore_trace.*$/gm)?.join('\n'))
          },
          'SIGKILL',
        )
      } finally {
        hanging.closeAllConnections()
        hanging.close()
      }
    })

    test("says at start where its spans go and how, the endpoint's password hidden", async () => {
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:hunter2@127.0.0.1:9/',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'plantstore-eu',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.01',
      }
      await withServer(
        backend,
        env,
        async (server) => {
          const line = server.stdout.split('\n').find((text) => text.includes('"tracing on'))
          assert.ok(line, server.stdout)
          const { endpoint, protocol, serviceName, sampler, samplerArg } = JSON.parse(line) as Record<string, string>
          assert.deepEqual(
            { endpoint, protocol, serviceName, sampler, samplerArg },
            {
              endpoint: 'http://collector:***@127.0.0.1:9/v1/traces',
              protocol: 'http/json',
              serviceName: 'plantstore-eu',
              sampler: 'parentbased_traceidratio',
              samplerArg: '0.01',
            },
          )
          assert.ok(!server.stdout.includes('hunter2'))
        },
        'SIGKILL',
      )
    })

    test('an OTLP protocol it does not speak stops the start with one line naming the variable', async () => {
      const database = await backend.createDatabase()
      try {
        const result = await runCli(['serve', '--port', '0', '--database', database.url], {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        })
        assert.equal(result.code, 1)
        assert.equal(
          result.stderr.trim(),
          'plantstore: OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not http/protobuf or http/json',
        )
      } finally {
        await database.dispose()
      }
    })

    test('without an endpoint, neither the tracing code nor the OpenTelemetry SDK is loaded; with one, both are', async () => {
      const hook = fileURLToPath(new URL('../helpers/record-imports.mjs', import.meta.url))
      const imported = async (env: Record<string, string>) => {
        const file = join(tempDir(), 'imports.txt')
        await withServer(
          backend,
          { NODE_OPTIONS: `--import=${hook}`, PLANTSTORE_TEST_IMPORTS: file, ...env },
          async () => {},
        )
        // prom-client requires the OpenTelemetry API (its exemplars read the active span) whatever the settings:
        // that package alone does nothing until an SDK registers. Node 22.15 and later show requires to the hook.
        return readFileSync(file, 'utf8')
          .split('\n')
          .filter((line) => /opentelemetry|@fastify\/otel|\/tracing\/index/.test(line) && line !== '@opentelemetry/api')
      }
      assert.deepEqual(await imported({}), [])
      const traced = await imported({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' })
      assert.ok(
        traced.some((line) => /^\.\/tracing\/index\.[jt]s$/.test(line)),
        traced.join('\n'),
      )
      assert.ok(traced.includes('@opentelemetry/sdk-trace-node'), traced.join('\n'))
    })

    test('a graceful stop sends the spans still buffered', async () => {
      const receiver = await startOtlpReceiver()
      // Far longer than the test: only the stop can send them.
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '600000',
      }
      try {
        await withServer(backend, env, async (server, token) => {
          const traceparent = `00-${'1'.repeat(32)}-${PARENT_ID}-01`
          await http(server.baseUrl, 'GET', '/plants', { token, headers: { traceparent } })
          assert.equal(receiver.spans.length, 0, 'nothing sent before the stop')
          await server.stop()
          assert.ok(receiver.spans.some((span) => span.traceId === '1'.repeat(32) && span.kind === 2))
        })
      } finally {
        await receiver.close()
      }
    })
  })
}
