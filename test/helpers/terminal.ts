import { spawn } from 'node:child_process'
import { CONFIG_KEYS } from '../../src/config.js'
import { plantstoreCommand, REPO_ROOT, tempDatabase } from './server-process.js'

// The developer's own service settings stay out of the child, as in server-process.ts.
const OWN = new Set<string>([...CONFIG_KEYS, 'NODE_TEST_CONTEXT'])

/** A command line as one string for `script -c`, each word quoted for sh. */
const shellWords = (words: string[]) => words.map((word) => `'${word.replaceAll("'", "'\\''")}'`).join(' ')

/**
 * Runs `plantstore serve` under util-linux `script`, which gives it a pseudo-terminal, until `done` matches what it
 * printed; resolves with that output once it has exited. `act`, when given, is called with the server's URL once it
 * listens (its requests' lines can then be waited for).
 */
export function serveOnTerminal(done: RegExp, act?: (baseUrl: string) => Promise<void>): Promise<string> {
  const command = shellWords(plantstoreCommand(['serve', '--port', '0', '--database', tempDatabase()]))
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !OWN.has(key)))
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
    let acting = false
    child.stdout.on('data', (chunk: string) => {
      output += chunk
      const listening = /Server listening at (http:\/\/[0-9.:]+)/.exec(output)
      if (act && listening && !acting) {
        acting = true
        act(listening[1]!).catch((err: Error) => fail(`acting on the server failed: ${err.message}`))
      }
      if (done.test(output)) child.kill('SIGTERM')
    })
  })
}

/**
 * Runs `plantstore ...args` to its end under `script`, which gives it a pseudo-terminal (stdout and stderr both);
 * resolves with everything it printed there and its exit code as `script` reports it.
 */
export function runOnTerminal(args: string[]): Promise<{ output: string; code: number | null }> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !OWN.has(key)))
  const child = spawn('script', ['-qec', shellWords(plantstoreCommand(args)), '/dev/null'], { cwd: REPO_ROOT, env })
  let output = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`plantstore ${args.join(' ')} on a terminal did not end within 30 s:\n${output}`))
    }, 30_000)
    child.once('error', (err) => reject(new Error(`cannot run script (util-linux): ${err.message}`)))
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => (output += chunk))
    child.once('close', (code) => {
      clearTimeout(timer)
      resolve({ output, code })
    })
  })
}
