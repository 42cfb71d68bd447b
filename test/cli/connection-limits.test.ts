import assert from 'node:assert/strict'
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { after, afterEach, describe, test } from 'node:test'
import { parsed, rawExchange } from '../helpers/raw-http.js'
import { cleanup, eventually, startServer, type EnvOverrides } from '../helpers/server-process.js'

after(cleanup)

const held: Socket[] = []
afterEach(() => {
  for (const socket of held.splice(0)) socket.destroy()
})

/** Opens `count` connections that send nothing, one after another, so the server accepts them in that order. */
async function hold(port: number, count: number): Promise<Socket[]> {
  const sockets: Socket[] = []
  for (let i = 0; i < count; i++) {
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => {})
    held.push(socket)
    await once(socket, 'connect')
    sockets.push(socket)
  }
  return sockets
}

/** The status of the answer to a request sent on a connection already open. */
async function answerOn(socket: Socket): Promise<number> {
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  const [chunk] = (await once(socket, 'data')) as [Buffer]
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString())?.[1])
}

const HEALTHZ = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
/** One request on a new connection: the server's whole answer, and how long until it closed the connection. */
const ask = (port: number, head = HEALTHZ) => rawExchange(port, [head], { closeAfterMs: 5000 })

async function serverWith(env: EnvOverrides) {
  // Idle connections stay open for the test's length, unless refused.
  return startServer({ env: { HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '20000', ...env } })
}

/** The value of one sample line of the Prometheus text, or undefined when absent. */
function sample(text: string, name: string): number | undefined {
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `))
  return line === undefined ? undefined : Number(line.slice(name.length + 1))
}

describe('plantstore serve, open connections per client address', () => {
  test('refuses a connection past HTTP_MAX_CONNECTIONS_PER_ADDRESS with 429 in the Error shape, Retry-After and Connection: close, then closes it', async () => {
    const server = await serverWith({ HTTP_MAX_CONNECTIONS_PER_ADDRESS: '4' })
    await hold(server.port, 4)
    const { text, ms } = await ask(server.port)
    const res = parsed(text)
    assert.equal(res.status, 429, text)
    assert.deepEqual(res.body, { error: 42903, message: '4 connections from this address are open; close one first' })
    assert.match(res.head, /\r\nretry-after: 1\r\n/i)
    assert.match(res.head, /\r\nconnection: close(\r\n|$)/i)
    assert.ok(ms < 5000, 'the server closed the connection')
  })

  test('logs a refused connection with the address it came from and the cap that refused it; a cap of one in the singular', async () => {
    const server = await serverWith({ HTTP_MAX_CONNECTIONS_PER_ADDRESS: '1' })
    await hold(server.port, 1)
    const refused = parsed((await ask(server.port)).text)
    assert.deepEqual(refused.body, { error: 42903, message: '1 connection from this address is open; close it first' })
    const [line] = await server.waitForStdout(/\{[^\n]*"connection refused"[^\n]*\}/)
    const logged = JSON.parse(line) as Record<string, unknown>
    assert.equal(logged.client, '127.0.0.1', line)
    assert.equal(logged.cap, 'address', line)
  })

  test('takes a connection from the address again once one of its connections has closed', async () => {
    const server = await serverWith({ HTTP_MAX_CONNECTIONS_PER_ADDRESS: '3' })
    const [first] = await hold(server.port, 3)
    assert.equal(parsed((await ask(server.port)).text).status, 429)
    first!.destroy()
    await eventually(async () => parsed((await ask(server.port)).text).status === 200, 5000, 50)
  })

  test('counts refused connections in plantstore_http_connections_refused_total and open ones in plantstore_http_connections', async () => {
    const server = await serverWith({ HTTP_MAX_CONNECTIONS_PER_ADDRESS: '3' })
    const [first] = await hold(server.port, 3)
    let refused = 0
    for (let i = 0; i < 2; i++) {
      assert.equal(parsed((await ask(server.port)).text).status, 429)
      refused++
    }
    first!.destroy()
    // Until the server has seen the close, the scrape itself may be refused, and counted.
    let text = ''
    await eventually(
      async () => {
        text = (await ask(server.port, 'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).text
        if (text.startsWith('HTTP/1.1 200 ')) return true
        refused++
        return false
      },
      5000,
      50,
    )
    assert.equal(sample(text, 'plantstore_http_connections_refused_total{limit="address"}'), refused, text)
    assert.equal(sample(text, 'plantstore_http_connections'), 3, 'two held and the scrape itself')
  })

  test('does not cap a trusted proxy (TRUST_PROXY) per address, only by HTTP_MAX_CONNECTIONS', async () => {
    const server = await serverWith({
      TRUST_PROXY: '127.0.0.1',
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: '2',
      HTTP_MAX_CONNECTIONS: '5',
    })
    const sockets = await hold(server.port, 5)
    assert.equal(await answerOn(sockets[4]!), 200, 'the fifth connection from the proxy is served')
    assert.equal(parsed((await ask(server.port)).text).status, 503, 'a sixth is one too many for the process')
  })
})

describe('plantstore serve, open connections per process', () => {
  test('refuses a connection past HTTP_MAX_CONNECTIONS with 503 in the Error shape, Retry-After and Connection: close', async () => {
    const server = await serverWith({ HTTP_MAX_CONNECTIONS: '3' })
    await hold(server.port, 3)
    const { text, ms } = await ask(server.port)
    const res = parsed(text)
    assert.equal(res.status, 503, text)
    assert.deepEqual(res.body, {
      error: 50303,
      message: 'this instance has 3 open connections; retry shortly or on another',
    })
    assert.match(res.head, /\r\nretry-after: 1\r\n/i)
    assert.match(res.head, /\r\nconnection: close(\r\n|$)/i)
    assert.ok(ms < 5000, 'the server closed the connection')
  })
})
