import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import type { Cleanup } from './cleanup.js'
import { getPage } from './http.js'
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

/**
 * The settings every service runs with: every feature on, as in production, at limits a run never reaches (a 429
 * or 409 fails the run). At the default quota a full run's POSTs filled the listed account in its fifth round; the
 * default page budget fits 50 connections of limit=20 pages exactly.
 */
export const SERVICE_ENV: Readonly<Record<string, string>> = {
  LOG_LEVEL: 'info',
  DATABASE_MIGRATE_ON_START: 'false',
  PLANTSTORE_RATE_LIMIT: '1000000/s',
  PLANTSTORE_ACCOUNT_RATE_LIMIT: '1000000/s',
  PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: '999999999',
  PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT: '100000000',
  PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS: '100000000',
}

export interface Server {
  /** 'reference', 'SQLite', 'SQLite plain', 'PostgreSQL on Node 26'…: the report's row names. */
  label: string
  url: string
  pid: number
  stop(): Promise<void>
}

/** A Node binary, or another checkout's build, the servers run on (bench/runtimes.ts: one per --node, --service). */
export interface Runtime {
  node: string
  /** "v26.10.0". */
  version: string
  /** What labels its servers (" on Node 26", " at 4994c10"); empty for the harness's own in a run of one. */
  tag: string
  /** The service's entry point, and the node flags of its bin/plantstore.js. */
  serviceMain: string
  nodeFlags: string[]
  /** Another checkout, whose build runs beside this one's (--service DIR): a service only, no plain handler. */
  checkout?: string
  /** The plain handler compiled where its packages resolve for this binary. */
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

/** Ready means an authenticated request succeeds, not merely listening. */
async function waitReady(child: ChildProcess, url: string, token: string, label: string, logFile: string) {
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`${label} exited with ${child.exitCode} at start:\n${readFileSync(logFile, 'utf8').trim()}`)
    }
    const status = await getPage(url, token, '/plants?limit=1').then(
      (page) => page.status,
      () => 0,
    )
    if (status === 200) return
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
 * Starts a server process with `node` on the servers' core. Its stdout (the service's request logs: it is measured
 * with logging on) goes to /dev/null; stderr to a file, read only to explain a failed start.
 */
async function startProcess(
  label: string,
  args: (port: number) => string[],
  env: Record<string, string>,
  token: string,
  context: ServerContext,
  node = process.execPath,
): Promise<Server> {
  const port = await freePort()
  const logFile = path.join(context.tmpDir, `${slug(label)}.stderr.log`)
  const stderr = openSync(logFile, 'w')
  const [command, commandArgs] = pinned(context.cpu, node, args(port))
  const options = { cwd: REPO_DIR, env: { ...process.env, ...env } }
  const child = spawn(command, commandArgs, { ...options, stdio: ['ignore', 'ignore', stderr] })
  closeSync(stderr)
  context.cleanup.track(child)
  const stop = stopper(child)
  context.cleanup.add(`stop ${label}`, stop)
  const url = `http://127.0.0.1:${port}`
  await waitReady(child, url, token, label, logFile)
  return { label, url, pid: child.pid as number, stop }
}

/**
 * Compiles bench/NAME.ts, a server standing alone, to plain JavaScript in `dir`, so it runs with node like the
 * service's dist/ and neither pays for a TypeScript loader; its packages resolve from `dir`'s node_modules.
 */
export function compileScript(name: string, dir: string): string {
  const source = readFileSync(path.join(BENCH_DIR, `${name}.ts`), 'utf8')
  const compilerOptions = { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 }
  const file = path.join(dir, `${name}.mjs`)
  writeFileSync(file, ts.transpileModule(source, { compilerOptions }).outputText)
  return file
}

/** The reference server (bench/reference-server.ts): accepts `token` only, answers every list with `listBody`. */
export function startReference(listBody: string, token: string, context: ServerContext): Promise<Server> {
  const script = compileScript('reference-server', context.tmpDir)
  const env = { PLANTSTORE_BENCH_TOKEN: token, PLANTSTORE_BENCH_LIST_BODY: listBody }
  return startProcess('reference', (port) => [script, String(port)], env, token, context)
}

/** The plain handler (bench/plain-server.ts) on a seeded database, accepting the account's `token` only. */
export function startPlain(
  label: string,
  databaseUrl: string,
  account: string,
  token: string,
  context: ServerContext,
  runtime: Runtime,
): Promise<Server> {
  const env = { PLANTSTORE_BENCH_DATABASE: databaseUrl, PLANTSTORE_BENCH_ACCOUNT: account }
  const args = (port: number) => [runtime.plainServer, String(port)]
  return startProcess(label, args, { ...env, PLANTSTORE_BENCH_TOKEN: token }, token, context, runtime.node)
}

/**
 * The built service on a database bulk-seed.ts has migrated and filled (`token` is one of its accounts', to check
 * it is ready), with SERVICE_ENV and the node flags of its bin/plantstore.js, as in production; `env` adds settings
 * (the backlog twins'), `runtime` another Node binary or checkout.
 */
export function startService(
  label: string,
  databaseUrl: string,
  token: string,
  context: ServerContext,
  { env = {}, runtime }: { env?: Record<string, string>; runtime?: Runtime } = {},
): Promise<Server> {
  const main = runtime?.serviceMain ?? path.join(REPO_DIR, 'dist', 'cli', 'main.js')
  const flags = runtime?.nodeFlags ?? SERVICE_NODE_FLAGS
  const serve = [main, 'serve', '--host', '127.0.0.1', '--database', databaseUrl]
  const args = (port: number) => [...flags, ...serve, '--port', String(port)]
  return startProcess(label, args, { ...SERVICE_ENV, ...env }, token, context, runtime?.node)
}
