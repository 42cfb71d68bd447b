import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { cleanup, REPO_ROOT, tempDatabase } from '../helpers/server-process.js'

after(cleanup)

// The developer's own service settings stay out of the child, as in server-process.ts.
const OWN = /^(PORT|HOST|WORKERS|LOG_LEVEL|NODE_TEST_CONTEXT|DATABASE_.*|HTTP_.*|SHUTDOWN_.*|PLANTSTORE_.*)$/

/** Runs `plantstore serve` under util-linux `script`, which gives it a pseudo-terminal, until `done` matches. */
function serveOnTerminal(done: RegExp): Promise<string> {
  const main = join(REPO_ROOT, 'src', 'cli', 'main.ts')
  const command = `${process.execPath} --import tsx ${main} serve --port 0 --database ${tempDatabase()}`
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !OWN.test(key)))
  const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: REPO_ROOT, env: { ...env, LOG_LEVEL: 'info' } })
  let output = ''
  return new Promise((resolve, reject) => {
    const fail = (message: string) => {
      child.kill('SIGKILL')
      reject(new Error(`${message}:\n${output}`))
    }
    const timer = setTimeout(() => fail(`no ${done} within 15 s, or no exit after it`), 15_000)
    child.once('error', (err) => fail(`cannot run script (util-linux): ${err.message}`))
    child.once('exit', () => {
      clearTimeout(timer)
      if (done.test(output)) resolve(output)
      else reject(new Error(`script exited before ${done}:\n${output}`))
    })
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      output += chunk
      if (done.test(output)) child.kill('SIGTERM')
    })
  })
}

test('writes human-readable log lines when stdout is a terminal (JSON lines otherwise)', async () => {
  const output = await serveOnTerminal(/Server listening at/)
  const line = output.split(/\r?\n/).find((text) => text.includes('Server listening at'))!
  assert.match(line, /INFO/)
  assert.doesNotMatch(line, /^\{"level"/)
})
