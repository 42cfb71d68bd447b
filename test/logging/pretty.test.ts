import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import { prettyTerminal } from '../../src/logging/pretty.js'

/** What the terminal stream prints for these JSON log lines, colours off. */
async function printed(...lines: object[]): Promise<string> {
  let text = ''
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString()
      done()
    },
  })
  const stream = prettyTerminal({ destination, colorize: false })
  for (const line of lines) stream.write(JSON.stringify({ level: 30, time: 0, pid: 1, hostname: 'h', ...line }) + '\n')
  stream.end()
  await new Promise((resolve) => destination.on('finish', resolve))
  return text
}

test('prints a completed request on one line: method, URL, status and time', async () => {
  const text = await printed({
    reqId: 'r1',
    method: 'GET',
    route: '/plants',
    url: '/plants?limit=2',
    status: 200,
    durationMs: 1.25,
    client: '127.0.0.1',
    account: 'default',
    tokenId: 'tok_1',
    msg: 'request completed',
  })
  assert.match(text, /^\[[0-9:.]+\] INFO: request completed: GET \/plants\?limit=2 200 in 1\.25 ms\n$/)
})

test("keeps every field of another line, a refused connection's client address among them", async () => {
  const text = await printed({ client: '203.0.113.9', cap: 'per address', msg: 'connection refused' })
  assert.match(text, /INFO: connection refused\n/)
  assert.match(text, /client: "203\.0\.113\.9"/)
  assert.match(text, /cap: "per address"/)
})
