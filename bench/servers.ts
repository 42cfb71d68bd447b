import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import type { Cleanup } from './cleanup.js'
import { pinned } from './machine.js'

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
export const REPO_DIR = path.dirname(BENCH_DIR)

/** The node flags of a bin/plantstore.js: those of its `#!/usr/bin/env -S node …` line. */
export function nodeFlagsOf(binFile: string): string[] {
  const shebang = readFileSync(binFile, 'utf8').split('\n')[0] ?? ''
  const flags = /^#!\/usr\/bin\/env -S node(.*)$/.exec(shebang)?.[1]
  if (flags === undefined) throw new Error(`${binFile}: no "#!/usr/bin/env -S node" line: ${shebang}`)
  return flags.trim().split(/\s+/).filter(Boolean)
}

/** The node flags the service runs with in production. */
export const SERVICE_NODE_FLAGS = nodeFlagsOf(path.join(REPO_DIR, 'bin', 'plantstore.js'))

/** The per-token rate limit the services run with: on, far above what one wrk connection set can send. */
export const BENCH_RATE_LIMIT = '1000000/s'

/**
 * The plants quota the services run with: on (every insert checks the account's count), far above what a run
 * adds. At the default of 1,000,000 a full run's POSTs filled the listed account in its fifth round, and every
 * later POST was a 409.
 */
export const BENCH_PLANT_QUOTA = '999999999'

/**
 * The page budget the services run with: on (every GET /plants takes and gives back its rows), far above what a run
 * holds. The default (1,000 rows per account) fits the 50 connections of limit=20 pages exactly; `--connections`
 * above 50 would meet it, and a 429 fails the run.
 */
export const BENCH_PAGE_ROWS = '100000000'

export interface Server {
  /** 'reference', 'SQLite', 'SQLite plain', 'PostgreSQL on Node 26'…: the report's row names. */
  label: string
  url: string
  pid: number
  stop(): Promise<void>
}

/** A Node binary, or another checkout's build, the servers run on (bench/runtimes.ts: one per `--node`, `--service`). */
export interface Runtime {
  /** The node binary. */
  node: string
  /** "v26.10.0". */
  version: string
  /** What labels its servers in a run of several binaries (" on Node 26"); empty when it is the only one. */
  tag: string
  /** The service's entry point run with this binary. */
  serviceMain: string
  /** The node flags the service runs with: those of its checkout's bin/plantstore.js. */
  nodeFlags: string[]
  /** Another checkout whose build runs beside this one's (--service DIR): its service only, no plain handler. */
  checkout?: string
  /** The plain handler (bench/plain-server.ts) compiled where its packages resolve for this binary. */
  plainServer: string
}

/** What every server start needs from the harness. */
export interface ServerContext {
  cpu: number | undefined
  tmpDir: string
  cleanup: Cleanup
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}

function statusOf(url: string, token: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(`${url}/plants?limit=1`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.once('error', () => resolve(0))
    req.end()
  })
}

/**
 * Ready means an authenticated request succeeds, not merely listening: the service creates the bootstrap token
 * only after it listens.
 */
async function waitReady(child: ChildProcess, url: string, token: string, label: string, logFile: string) {
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`${label} exited with ${child.exitCode} at start:\n${readFileSync(logFile, 'utf8').trim()}`)
    }
    if ((await statusOf(url, token)) === 200) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${label} was not ready within 30 s (stderr in ${logFile})`)
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      const kill = setTimeout(() => child.kill('SIGKILL'), 10_000)
      child.once('exit', () => {
        clearTimeout(kill)
        resolve()
      })
      child.kill('SIGTERM')
    })
}

/** "PostgreSQL plain on Node 26" → "postgresql_plain_on_node_26": for file and schema names. */
export function slug(label: string): string {
  return label.toLowerCase().replace(/[^a-z0-9]+/g, '_')
}

/**
 * Starts a server process with `node` (the harness's by default), pinned to the servers' core. Its stdout (the
 * service's request logs: the benchmark measures with logging on) goes to /dev/null; stderr goes to a file, read
 * only to explain a failed start.
 */
async function startProcess(
  label: string,
  args: (port: number) => string[],
  env: Record<string, string>,
  token: string,
  context: ServerContext,
  node = process.execPath,
) {
  const port = await freePort()
  const logFile = path.join(context.tmpDir, `${slug(label)}.stderr.log`)
  const stderr = openSync(logFile, 'w')
  const [command, commandArgs] = pinned(context.cpu, node, args(port))
  const child = spawn(command, commandArgs, {
    cwd: REPO_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', stderr],
  })
  closeSync(stderr)
  context.cleanup.track(child)
  const stop = stopper(child)
  context.cleanup.add(`stop ${label}`, stop)
  const url = `http://127.0.0.1:${port}`
  await waitReady(child, url, token, label, logFile)
  return { label, url, pid: child.pid as number, stop }
}

/**
 * Compiles bench/NAME.ts, a server standing alone (no import of the project's own modules), to plain JavaScript
 * in `dir`, so it runs with node like the service's dist/ and neither pays for a TypeScript loader; its packages
 * resolve from `dir`'s node_modules.
 */
export function compileScript(name: string, dir: string): string {
  const source = readFileSync(path.join(BENCH_DIR, `${name}.ts`), 'utf8')
  const output = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
  })
  const file = path.join(dir, `${name}.mjs`)
  writeFileSync(file, output.outputText)
  return file
}

/** Starts the reference server, which accepts `token` only and answers every list request with `listBody`. */
export function startReference(listBody: string, token: string, context: ServerContext): Promise<Server> {
  const script = compileScript('reference-server', context.tmpDir)
  return startProcess(
    'reference',
    (port) => [script, String(port)],
    {
      PLANTSTORE_BENCH_TOKEN: token,
      PLANTSTORE_BENCH_LIST_BODY: listBody,
    },
    token,
    context,
  )
}

/** Starts the plain handler (bench/plain-server.ts) on a seeded database, accepting the account's `token` only. */
export function startPlain(
  label: string,
  databaseUrl: string,
  account: string,
  token: string,
  context: ServerContext,
  runtime: Runtime,
): Promise<Server> {
  return startProcess(
    label,
    (port) => [runtime.plainServer, String(port)],
    { PLANTSTORE_BENCH_DATABASE: databaseUrl, PLANTSTORE_BENCH_ACCOUNT: account, PLANTSTORE_BENCH_TOKEN: token },
    token,
    context,
    runtime.node,
  )
}

/**
 * Starts the built service (dist/) on a database the harness has seeded (bench/bulk-seed.ts): migrated by the CLI
 * (so the service does not migrate on start, as in production) and holding the accounts' tokens; `token` is one
 * of them, to check the service is ready. It runs with its bin/plantstore.js's node flags, as production does.
 * `env` adds settings (the backlog scenarios' webhook ones); `runtime`, another Node binary or checkout.
 */
export function startService(
  label: string,
  databaseUrl: string,
  token: string,
  context: ServerContext,
  { env = {}, runtime }: { env?: Record<string, string>; runtime?: Runtime } = {},
): Promise<Server> {
  const main = runtime?.serviceMain ?? path.join(REPO_DIR, 'dist', 'cli', 'main.js')
  return startProcess(
    label,
    (port) => [
      ...(runtime?.nodeFlags ?? SERVICE_NODE_FLAGS),
      main,
      'serve',
      ...['--port', String(port), '--host', '127.0.0.1', '--database', databaseUrl],
    ],
    // Every feature on, as in production: the per-token and per-account rate limits count every request, every insert checks the
    // plants quota and every page takes its rows of the page budget, at limits a run never reaches (a 429 or 409 fails the run).
    {
      LOG_LEVEL: 'info',
      DATABASE_MIGRATE_ON_START: 'false',
      PLANTSTORE_RATE_LIMIT: BENCH_RATE_LIMIT,
      PLANTSTORE_ACCOUNT_RATE_LIMIT: BENCH_RATE_LIMIT,
      PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: BENCH_PLANT_QUOTA,
      PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT: BENCH_PAGE_ROWS,
      PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS: BENCH_PAGE_ROWS,
      ...env,
    },
    token,
    context,
    runtime?.node,
  )
}
