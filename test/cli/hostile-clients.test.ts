import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { cleanup, eventually, http, startServer, type ServerProcess } from '../helpers/server-process.js'

after(cleanup)

const TOKEN = 'timeouts-' + randomBytes(30).toString('base64url')

/** Writes `chunks` to a raw connection and resolves with everything the server sent until it closed. */
function rawExchange(port: number, chunks: string[]): Promise<{ text: string; ms: number }> {
  return new Promise((resolve) => {
    const started = Date.now()
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (text += chunk))
    // A reset after the response is fine: 'close' follows and resolves with what arrived.
    socket.on('error', () => {})
    socket.once('close', () => resolve({ text, ms: Date.now() - started }))
    for (const chunk of chunks) socket.write(chunk)
  })
}

/** The status line's code and the JSON body of a raw HTTP response. */
function parsed(raw: string): { status: number; body: unknown; head: string } {
  const [head = '', body = ''] = raw.split('\r\n\r\n')
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(body), head }
}

describe('plantstore serve, slow and oversized clients', () => {
  let server: ServerProcess
  before(async () => {
    server = await startServer({
      env: { HTTP_HEADERS_TIMEOUT_MS: '500', HTTP_REQUEST_TIMEOUT_MS: '1500', PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN },
    })
    // The bootstrap token exists once a request with it succeeds (it is created just after listening).
    await eventually(
      async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200,
      10_000,
    )
  })
  after(() => server.stop('SIGKILL'))

  test('drops a client that does not finish its headers within HTTP_HEADERS_TIMEOUT_MS, with 408 in the Error shape', async () => {
    const { text, ms } = await rawExchange(server.port, ['GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: '])
    const res = parsed(text)
    assert.equal(res.status, 408, text)
    assert.deepEqual(res.body, {
      error: 40801,
      message: 'the request did not arrive in time; the connection is closed',
    })
    assert.ok(ms >= 450 && ms < 3000, `dropped after ${ms} ms`)
  })

  test('drops a client whose body does not arrive within HTTP_REQUEST_TIMEOUT_MS, with 408', async () => {
    const head =
      'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n' +
      `Authorization: Bearer ${TOKEN}\r\n\r\n`
    const { text, ms } = await rawExchange(server.port, [head, '{"id": 1,'])
    assert.equal(parsed(text).status, 408, text)
    assert.ok(ms >= 1400 && ms < 4000, `dropped after ${ms} ms`)
  })

  test('answers request headers over 16 KiB with 431 in the Error shape', async () => {
    const big = 'x'.repeat(17 * 1024)
    const { text } = await rawExchange(server.port, [`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${big}\r\n\r\n`])
    const res = parsed(text)
    assert.equal(res.status, 431, text)
    assert.deepEqual(res.body, { error: 43101, message: 'request headers are over 16 KiB' })
  })

  test('answers bytes that are not HTTP with 400 in the Error shape', async () => {
    const { text } = await rawExchange(server.port, ['HELLO\r\n\r\n'])
    const res = parsed(text)
    assert.equal(res.status, 400, text)
    assert.deepEqual(res.body, { error: 40003, message: 'malformed HTTP request' })
  })
})
