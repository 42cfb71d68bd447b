import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { cleanup, REPO_ROOT, tempDatabase } from '../helpers/server-process.js'

after(cleanup)

/** Runs `plantstore serve` under `script`, which gives it a pseudo-terminal, until `done` matches its output. */
function serveOnTerminal(done: RegExp): Promise<string> {
  const main = join(REPO_ROOT, 'src', 'cli', 'main.ts')
  const command = `${process.execPath} --import tsx ${main} serve --port 0 --database ${tempDatabase()}`
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: 'info' },
  })
  let output = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`no match for ${done} within 15 s:\n${output}`))
    }, 15_000)
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      output += chunk
      if (!done.test(output)) return
      clearTimeout(timer)
      child.once('exit', () => resolve(output))
      child.kill('SIGTERM')
    })
  })
}

test('writes human-readable log lines when stdout is a terminal (JSON lines otherwise)', async () => {
  const output = await serveOnTerminal(/Server listening at/)
  const line = output.split(/\r?\n/).find((text) => text.includes('Server listening at'))!
  assert.match(line, /INFO/)
  assert.doesNotMatch(line, /^\{"level"/)
})
