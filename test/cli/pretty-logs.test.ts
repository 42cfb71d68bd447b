import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { cleanup } from '../helpers/server-process.js'
import { serveOnTerminal } from '../helpers/terminal.js'

after(cleanup)

test('writes human-readable log lines when stdout is a terminal (JSON lines otherwise)', async () => {
  const output = await serveOnTerminal(/Server listening at/)
  const line = output.split(/\r?\n/).find((text) => text.includes('Server listening at'))!
  assert.match(line, /INFO/)
  assert.doesNotMatch(line, /^\{"level"/)
})
