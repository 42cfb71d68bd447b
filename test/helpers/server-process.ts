import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SERVICE_NODE_FLAGS } from '../../scripts/service-node-flags.js'
import { CONFIG_KEYS } from '../../src/config.js'

/** The repository root: the cwd of every child. */
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The longest any wait on a child may take before the test fails instead of hanging. */
export const WAIT_MS = 15_000

const MAIN = join(REPO_ROOT, 'bin', 'plantstore.js')
let build: { failed?: Error } | undefined

/**
 * `plantstore ...args` as users run it: bin/plantstore.js, with its first line's node flags, on the compiled dist/.
 * Half a second or more quicker to start than the sources through tsx, for each of the suite's hundreds of
 * children. dist/ is first brought up to date with the sources, once per test process (npm start's `build
 * --if-changed`: a look at modification times when nothing changed; `npm test` has built it already). A build that
 * fails fails every test that starts a child, with tsc's errors printed once.
 */
export function plantstoreCommand(args: string[]): string[] {
  if (build === undefined) {
    try {
      execFileSync(process.execPath, [join(REPO_ROOT, 'scripts', 'build.js'), '--if-changed'], { stdio: 'inherit' })
      build = {}
    } catch (err) {
      build = { failed: new Error(`dist/ could not be built from the sources: ${(err as Error).message}`) }
    }
  }
  if (build.failed) throw build.failed
  return [process.execPath, ...SERVICE_NODE_FLAGS, MAIN, ...args]
}

// Settings the service reads from the environment: children start without the developer's own values.
const SERVICE_KEYS: readonly string[] = [...CONFIG_KEYS, 'NODE_TEST_CONTEXT']

const children = new Set<ChildProcess>()
const directories = new Set<string>()

/** Environment overrides for a child; `undefined` removes a variable. */
export type EnvOverrides = Record<string, string | undefined>

function childEnv(overrides: EnvOverrides): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const key of SERVICE_KEYS) delete env[key]
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }
  return env
}

function spawnChild(commandLine: string[], env: EnvOverrides, cwd = REPO_ROOT): ChildProcess {
  const [command, ...rest] = commandLine
  const child = spawn(command!, rest, {
    cwd,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.add(child)
  child.once('exit', () => children.delete(child))
  child.stdout!.setEncoding('utf8')
  child.stderr!.setEncoding('utf8')
  return child
}

/** Starts `plantstore ...args` and leaves the rest to the caller (cleanup() kills it if still running). */
export function spawnPlantstore(args: string[], env: EnvOverrides = {}): ChildProcess {
  return spawnChild(plantstoreCommand(args), env)
}

/** A new temporary directory, removed by cleanup(). */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-proc-'))
  directories.add(dir)
  return dir
}

/** A `sqlite:` DATABASE_URL for a new file in a new temporary directory. */
export function tempDatabase(): string {
  return `sqlite:${join(tempDir(), 'store.db')}`
}

/** Kills every child still running (SIGKILL) and removes the temporary directories. For `after` hooks. */
export async function cleanup(): Promise<void> {
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once('exit', () => resolve())
          child.kill('SIGKILL')
        }),
    ),
  )
  for (const dir of directories) rmSync(dir, { recursive: true, force: true })
  directories.clear()
}

/** Resolves with the exit code (null when killed by a signal) once `child` exits, or rejects after `ms`. */
function exited(child: ChildProcess, ms: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`process ${child.pid} did not exit within ${ms} ms`))
    }, ms)
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
}

/** What a finished CLI run printed, and its exit code. */
export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `plantstore ...args` in `cwd` to completion (killed and rejected after `timeoutMs`). */
export async function runCli(
  args: string[],
  env: EnvOverrides = {},
  timeoutMs = WAIT_MS,
  cwd = REPO_ROOT,
): Promise<CliResult> {
  const child = spawnChild(plantstoreCommand(args), env, cwd)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: string) => (stdout += chunk))
  child.stderr!.on('data', (chunk: string) => (stderr += chunk))
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()))
  try {
    const code = await exited(child, timeoutMs)
    await closed
    return { code, stdout, stderr }
  } catch (err) {
    throw new Error(`plantstore ${args.join(' ')}: ${(err as Error).message}\nstdout: ${stdout}\nstderr: ${stderr}`)
  }
}

/** A running `plantstore serve` process. */
export interface ServerProcess {
  /** `http://127.0.0.1:PORT`, from the "Server listening" log line. */
  baseUrl: string
  port: number
  process: ChildProcess
  /** Everything printed on stdout so far (keeps growing). */
  readonly stdout: string
  /** Everything printed on stderr so far (keeps growing). */
  readonly stderr: string
  /** Resolves with the first match of `pattern` on stdout, waiting for it up to `timeoutMs`. */
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /**
   * Resolves once everything the server printed before answering a request now is on `stdout`:
   * it sends GET /healthz with a fresh X-Request-Id and waits for that request's log line. One process only: each
   * worker of --workers writes its own lines, in batches, so another worker's may still be on their way.
   */
  settle(): Promise<void>
  /** Sends `signal` (SIGTERM by default) and resolves with the exit code (null if killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export interface ServerOptions {
  /** DATABASE_URL passed as --database; a new temporary one when not given. */
  database?: string
  /** Extra environment; LOG_LEVEL defaults to info, since readiness is read from the log. */
  env?: EnvOverrides
  /** Extra `serve` arguments, such as `--workers 2`. */
  args?: string[]
  /** A command that runs the server, given its command line (say, `unshare` for a private mount namespace). */
  prefix?: string[]
  /**
   * Another way to start the server than `node bin/plantstore.js serve`: `command` (say, `npm start --`)
   * run in `cwd`, followed by the serve flags. `prefix` does not apply.
   */
  via?: { command: string[]; cwd: string }
  /** How long to wait for the listening line: a start that first builds the project (npm start, npx) takes longer. */
  startTimeoutMs?: number
}

const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:(\d+))/

/** Starts `plantstore serve --port 0 --host 127.0.0.1 --database ...` and resolves once it listens. */
export async function startServer(options: ServerOptions = {}): Promise<ServerProcess> {
  const database = options.database ?? tempDatabase()
  const flags = ['--port', '0', '--host', '127.0.0.1', '--database', database, ...(options.args ?? [])]
  const env = { LOG_LEVEL: 'info', ...options.env }
  const child = options.via
    ? spawnChild([...options.via.command, ...flags], env, options.via.cwd)
    : spawnChild([...(options.prefix ?? []), ...plantstoreCommand(['serve', ...flags])], env)
  let stdout = ''
  let stderr = ''
  const listeners = new Set<() => void>()
  child.stdout!.on('data', (chunk: string) => {
    stdout += chunk
    for (const listener of listeners) listener()
  })
  child.stderr!.on('data', (chunk: string) => (stderr += chunk))
  // Until every process writing to it is gone: a server that outlives the child (started through npm) still prints.
  let ended = false
  child.stdout!.once('end', () => {
    ended = true
    for (const listener of listeners) listener()
  })

  const waitForStdout = (pattern: RegExp, timeoutMs = WAIT_MS): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      const check = () => {
        const match = stdout.match(pattern)
        if (match !== null) {
          done()
          resolve(match)
        } else if (ended) {
          done()
          reject(new Error(`server exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}`))
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`server printed no ${pattern} within ${timeoutMs} ms`))
      }, timeoutMs)
      const done = () => {
        clearTimeout(timer)
        listeners.delete(check)
      }
      listeners.add(check)
      check()
    })

  let match: RegExpMatchArray
  try {
    match = await waitForStdout(LISTENING, options.startTimeoutMs)
  } catch (err) {
    child.kill('SIGKILL')
    throw new Error(`${(err as Error).message}\nstdout: ${stdout}\nstderr: ${stderr}`)
  }
  const baseUrl = match[1]!
  return {
    baseUrl,
    port: Number(match[2]),
    process: child,
    get stdout() {
      return stdout
    },
    get stderr() {
      return stderr
    },
    waitForStdout,
    async settle() {
      const id = `settle-${randomUUID()}`
      const res = await fetch(`${baseUrl}/healthz`, { headers: { 'x-request-id': id } })
      await res.arrayBuffer()
      await waitForStdout(new RegExp(`"reqId":"${id}".*"request completed"`))
    },
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited(child, WAIT_MS)
    },
  }
}

/** A finished HTTP exchange: status, headers and the raw body text. */
export interface HttpResult {
  status: number
  headers: Headers
  text: string
}

/**
 * Sends one real HTTP request. `body` is sent as application/json: a string as is (for exact int64
 * literals), anything else through JSON.stringify. `token` becomes `Authorization: Bearer ...`.
 */
export async function http(
  baseUrl: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  let body: string | undefined
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json'
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  }
  const res = await fetch(baseUrl + path, { method, headers, body, signal: AbortSignal.timeout(WAIT_MS) })
  return { status: res.status, headers: res.headers, text: await res.text() }
}

/** Calls `check` every `intervalMs` until it returns true; rejects after `timeoutMs`. Resolves with the time taken. */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, intervalMs = 200): Promise<number> {
  const start = Date.now()
  for (;;) {
    if (await check()) return Date.now() - start
    if (Date.now() - start >= timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
