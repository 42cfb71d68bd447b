import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { cleanup, http } from '../helpers/server-process.js'
import { serveOnTerminal } from '../helpers/terminal.js'

after(cleanup)

test('writes human-readable log lines when stdout is a terminal (JSON lines otherwise)', async () => {
  const output = await serveOnTerminal(/Server listening at/)
  const line = output.split(/\r?\n/).find((text) => text.includes('Server listening at'))!
  assert.match(line, /INFO/)
  assert.doesNotMatch(line, /^\{"level"/)
})

test('writes one line per request on a terminal: method, URL, status and time', async () => {
  const output = await serveOnTerminal(/GET \/plants\?limit=2 401 in [0-9.]+ ms/, async (baseUrl) => {
    await http(baseUrl, 'GET', '/plants?limit=2')
  })
  const lines = output.replace(/\x1b\[[0-9;]*m/g, '').split(/\r?\n/)
  const at = lines.findIndex((line) => line.includes('GET /plants?limit=2 401'))
  assert.match(lines[at]!, /^\[[0-9:.]+\] INFO.*: request completed: GET \/plants\?limit=2 401 in [0-9.]+ ms$/)
  assert.doesNotMatch(lines[at + 1] ?? '', /^\s+\w+: /, 'no field lines below it')
})
