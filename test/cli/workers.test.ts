import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, test } from 'node:test'
import {
  cleanup,
  eventually,
  http,
  runCli,
  startServer,
  tempDatabase,
  type ServerProcess,
} from '../helpers/server-process.js'

after(cleanup)

const TOKEN = 'workers-' + randomBytes(30).toString('base64url')

/** GET /plants on a new connection (so the cluster may hand it to any worker); resolves with the status. */
function getOnNewConnection(server: ServerProcess, requestId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.baseUrl}/plants`, {
      agent: false,
      headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': requestId },
    })
    req.once('error', reject)
    req.once('response', (res) => {
      res.resume()
      res.once('end', () => resolve(res.statusCode ?? 0))
    })
    req.end()
  })
}

test('serve --workers 2 answers from two processes on one port, seeds one token, and exits 0 on SIGTERM', async () => {
  const database = tempDatabase()
  const server = await startServer({ database, args: ['--workers', '2'], env: { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN } })
  await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200, 10_000)
  // Both workers listening, else the cluster can only hand connections to the first.
  await eventually(async () => (server.stdout.match(/Server listening at/g) ?? []).length === 2, 10_000)
  const ids = Array.from({ length: 20 }, () => randomUUID())
  for (const id of ids) assert.equal(await getOnNewConnection(server, id), 200)
  // Each worker writes its own log lines in batches (at most 100 ms late): wait for every request's line.
  await eventually(async () => ids.every((id) => server.stdout.includes(`"reqId":"${id}"`)), 5000, 50)
  const pids = new Set(
    server.stdout
      .split('\n')
      .filter((line) => ids.some((id) => line.includes(`"reqId":"${id}"`)))
      .map((line) => (JSON.parse(line) as { pid: number }).pid),
  )
  assert.equal(pids.size, 2, `requests were answered by ${pids.size} process(es)`)
  const tokens = await runCli(['tokens', 'list', '--account', 'default', '--database', database])
  assert.equal(tokens.stdout.trim().split('\n').length, 2, `a header and one token:\n${tokens.stdout}`)
  assert.equal(await server.stop('SIGTERM'), 0)
  assert.equal(server.stderr, '')
})

test('serve --workers 2 replaces a worker that dies and keeps serving', async () => {
  const server = await startServer({ args: ['--workers', '2'], env: { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN } })
  await eventually(async () => (server.stdout.match(/Server listening at/g) ?? []).length === 2, 10_000)
  const victim = (
    JSON.parse(server.stdout.split('\n').find((line) => line.includes('Server listening at'))!) as { pid: number }
  ).pid
  process.kill(victim, 'SIGKILL')
  await eventually(async () => (server.stdout.match(/Server listening at/g) ?? []).length === 3, 10_000)
  assert.match(server.stderr, new RegExp(`worker ${victim} exited \\(SIGKILL\\); starting another`))
  assert.equal((await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status, 200)
  assert.equal(await server.stop('SIGTERM'), 0)
})

test('serve --workers 2 exits 1 naming PORT when the port is taken, instead of restarting workers forever', async () => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  try {
    const port = (blocker.address() as AddressInfo).port
    const result = await runCli([
      'serve',
      '--workers',
      '2',
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--database',
      tempDatabase(),
    ])
    assert.equal(result.code, 1, result.stderr)
    assert.match(result.stderr, /PORT: \d+ is already in use/)
  } finally {
    blocker.close()
  }
})
