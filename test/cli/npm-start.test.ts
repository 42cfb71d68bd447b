import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { heldPost } from '../helpers/held-request.js'
import {
  cleanup,
  eventually,
  http,
  REPO_ROOT,
  startServer,
  tempDir,
  type ServerOptions,
  type ServerProcess,
} from '../helpers/server-process.js'

const TOKEN = 'npm-start-' + randomBytes(30).toString('base64url')
// debug: the line that marks a request's arrival
const ENV = { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN, LOG_LEVEL: 'debug', SHUTDOWN_GRACE_SECONDS: '10' }

// Servers that may outlive the process the test started (the bug this file is about): killed at the end.
const servers = new Set<number>()
after(async () => {
  for (const pid of servers) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
  await cleanup()
})

/** A copy of the project's sources with the installed packages linked in, started as a newcomer starts it. */
function project(): string {
  const dir = tempDir()
  for (const entry of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'bin', 'scripts', 'clients']) {
    // The typed client's sources, not its build: `npm run build` (npx runs it as `prepare`) makes that.
    const filter = (source: string) => !source.includes(join('clients', 'typescript', 'dist'))
    cpSync(join(REPO_ROOT, entry), join(dir, entry), { recursive: true, filter })
  }
  // Linked one by one, so that one (typescript) can be taken away.
  mkdirSync(join(dir, 'node_modules'))
  for (const entry of readdirSync(join(REPO_ROOT, 'node_modules'))) {
    symlinkSync(join(REPO_ROOT, 'node_modules', entry), join(dir, 'node_modules', entry))
  }
  return dir
}

/** The server process's pid, from its own log line, remembered for the final clean-up. */
function serverPid(server: ServerProcess): number {
  const pid = Number(/"pid":(\d+)[^\n]*Server listening at/.exec(server.stdout)?.[1])
  assert.ok(pid > 0, `a pid in the listening line:\n${server.stdout}`)
  servers.add(pid)
  return pid
}

/** The parent pid of `pid`, from /proc (field 4, after the command name in parentheses). */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Starts the server as `options` say and waits until the seeded token works. */
async function start(options: ServerOptions): Promise<{ server: ServerProcess; pid: number }> {
  // A fresh copy builds the whole project (tsc) before it listens: 15 s and more on a busy 2-core machine.
  const server = await startServer({ startTimeoutMs: 60_000, ...options, env: { ...ENV, ...options.env } })
  const pid = serverPid(server)
  await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200, 10_000)
  return { server, pid }
}

/**
 * Sends SIGTERM to the process the test started, and only to it, while a request is in flight; checks the request
 * is answered and the server process then ends, port freed. Resolves with how the started process ended.
 */
async function stopsGracefully(server: ServerProcess, pid: number, id: number): Promise<number | string | null> {
  const held = heldPost(server, TOKEN, id)
  await held.arrived()
  const ended = server.stop('SIGTERM')
  await server.waitForStdout(/"shutting down"/)
  held.sendRest()
  const res = await held.response
  assert.equal(res.status, 200, res.text)
  await ended
  await eventually(async () => !alive(pid), 15_000)
  assert.match(server.stdout, /"msg":"stopped"/, 'logged just before exiting 0')
  await assert.rejects(fetch(`${server.baseUrl}/healthz`), 'the port is free')
  return server.process.exitCode ?? server.process.signalCode
}

describe('npm start, run from a fresh copy of the project', () => {
  let dir: string
  before(() => {
    dir = project()
  })
  const npmStart = () => ({ via: { command: ['npm', 'start', '--'], cwd: dir } })

  test('builds, runs node as npm’s own child, and stops gracefully with exit 0 when only npm gets SIGTERM', async () => {
    const { server, pid } = await start(npmStart())
    assert.ok(existsSync(join(dir, 'dist', '.built')), 'the first start built dist/')
    assert.equal(parentOf(pid), server.process.pid, 'no shell between npm and the server')
    const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    assert.ok(commandLine.includes('--max-semi-space-size=8'), `node runs with the service's V8 flags: ${commandLine}`)
    assert.equal(await stopsGracefully(server, pid, 1), 0, 'npm exits with the server’s status')
  })

  test('starts again without the TypeScript compiler when nothing changed, and needs it once a source changes', async () => {
    rmSync(join(dir, 'node_modules', 'typescript'))
    const { server, pid } = await start(npmStart())
    assert.equal(await stopsGracefully(server, pid, 2), 0)

    const later = new Date(Date.now() + 2000)
    utimesSync(join(dir, 'src', 'version.ts'), later, later)
    await assert.rejects(
      start(npmStart()),
      /plantstore: building needs the development dependencies \(typescript is not installed\); install for production with `npm ci --include=dev/,
      'a changed source is compiled, which needs typescript: one line says so and how to install',
    )
  })
})

describe('npx plantstore serve, run from a fresh copy of the project', () => {
  test('stops gracefully when only npm gets SIGTERM, although npm’s shell does not pass the signal on', async () => {
    const dir = project()
    // A cache of its own: npx links the project into it; nothing comes from the registry.
    const env = { npm_config_cache: join(dir, '.npm-cache'), npm_config_offline: 'true' }
    const { server, pid } = await start({ via: { command: ['npx', 'plantstore', 'serve'], cwd: dir }, env })
    const shell = parentOf(pid)
    assert.notEqual(shell, server.process.pid, 'npm runs npx commands through a shell')
    assert.equal(parentOf(shell), server.process.pid)
    // npm ends the way its shell did: killed by SIGTERM. The server, re-parented, stops by itself and exits 0.
    assert.equal(await stopsGracefully(server, pid, 3), 'SIGTERM')
    assert.match(server.stderr, /the process that started this one \(pid \d+\) is gone; stopping/)
  })
})

/** The line a server that stops with its parent writes at start. */
const WATCHING = /^plantstore: started by a package manager: stops once its parent \(pid \d+\) is gone$/m

describe('a server whose parent goes away', () => {
  // A shell that stays the server's parent (a command after it), as npm's does for npx.
  const underShell = { prefix: ['sh', '-c', '"$@"; exit $?', 'sh'] }

  test('stops gracefully when npm started it (npm_lifecycle_event set)', async () => {
    const { server, pid } = await start({ ...underShell, env: { npm_lifecycle_event: 'start' } })
    assert.equal(parentOf(pid), server.process.pid)
    assert.match(server.stderr, WATCHING)
    await stopsGracefully(server, pid, 4)
  })

  /** Starts the server under `options`, stops only its parent, and checks the server, re-parented, still serves. */
  async function keepsServingWhenOrphaned(options: ServerOptions): Promise<void> {
    const { server, pid } = await start(options)
    assert.equal(parentOf(pid), server.process.pid)
    // Written before it listens, when it watches its parent: nothing else would stop it once orphaned.
    assert.doesNotMatch(server.stderr, WATCHING)
    await server.stop('SIGTERM')
    assert.notEqual(parentOf(pid), server.process.pid, 're-parented')
    assert.equal((await http(server.baseUrl, 'GET', '/healthz')).status, 200)
    assert.doesNotMatch(server.stdout, /"shutting down"/)
  }

  test('keeps serving when nothing says npm started it (nohup, setsid, a shell that exits)', async () => {
    await keepsServingWhenOrphaned({ ...underShell, env: { npm_lifecycle_event: undefined } })
  })

  test('keeps serving when an npm script started it to outlive it (nohup … &), once that script’s shell exits', async () => {
    const detaching = { prefix: ['sh', '-c', 'nohup "$@" & wait $!', 'sh'] }
    await keepsServingWhenOrphaned({ ...detaching, env: { npm_lifecycle_event: 'start:bg' } })
  })
})
