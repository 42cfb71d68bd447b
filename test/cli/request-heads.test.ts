import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { parsed, rawExchange } from '../helpers/raw-http.js'
import { cleanup, eventually, http, startServer, type ServerProcess } from '../helpers/server-process.js'

after(cleanup)

const TOKEN = 'heads-' + randomBytes(30).toString('base64url')

describe('plantstore serve, request heads a client could make ambiguous', () => {
  let server: ServerProcess
  before(async () => {
    server = await startServer({ env: { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN } })
    await eventually(
      async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200,
      10_000,
    )
  })
  after(() => server.stop('SIGKILL'))

  /** One raw request (the server closes the connection after its answer, or the test does after 5 s). */
  const send = async (head: string) => (await rawExchange(server.port, [head], { closeAfterMs: 5000 })).text

  for (const [order, first, second] of [
    ['a valid token first', TOKEN, 'not-the-token'],
    ['a valid token second', 'not-the-token', TOKEN],
  ]) {
    test(`refuses a second Authorization header with 400 in the Error shape (${order}), using neither`, async () => {
      const text = await send(
        `GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\n\r\n`,
      )
      const res = parsed(text)
      assert.equal(res.status, 400, text)
      assert.deepEqual(res.body, { error: 40004, message: 'Authorization: sent more than once; send it once' })
      assert.match(res.head, /\r\nconnection: close\r\n/i)
    })
  }

  test('refuses a second Host header with 400 in the Error shape', async () => {
    const text = await send(`GET /healthz HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n`)
    const res = parsed(text)
    assert.equal(res.status, 400, text)
    assert.deepEqual(res.body, { error: 40004, message: 'Host: sent more than once; send it once' })
  })

  test('answers an HTTP/1.1 request without Host with 400 in the Error shape, and closes the connection', async () => {
    const { text, ms } = await rawExchange(server.port, ['GET /healthz HTTP/1.1\r\n\r\n'], { closeAfterMs: 5000 })
    const res = parsed(text)
    assert.equal(res.status, 400, text)
    assert.deepEqual(res.body, { error: 40003, message: 'an HTTP/1.1 request needs a Host header' })
    assert.match(res.head, /\r\nconnection: close\r\n/i)
    assert.ok(ms < 5000, 'the server closed the connection')
  })

  test('serves an HTTP/1.0 request without Host, which that version allows', async () => {
    const res = parsed(await send('GET /healthz HTTP/1.0\r\n\r\n'))
    assert.equal(res.status, 200)
    assert.deepEqual(res.body, { status: 'ok' })
  })

  test('still serves a request with one Authorization and one Host header', async () => {
    const head = `GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`
    const res = parsed(await send(head))
    assert.equal(res.status, 200)
  })
})
