import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { SERVICE_NODE_FLAGS } from '../scripts/service-node-flags.js'
import type { Cleanup } from './cleanup.js'
import { getPage } from './http.js'
import { pinned } from './machine.js'

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
export const REPO_DIR = path.dirname(BENCH_DIR)
export const SERVICE_MAIN = path.join(REPO_DIR, 'dist', 'cli', 'main.js')
export { SERVICE_NODE_FLAGS }

/** The origin the services allow (CORS on, as a service called from a web app runs), sent by the cors scenario. */
export const CORS_ORIGIN = 'https://app.example.com'

/**
 * The settings every service runs with: every feature on, as in production, at limits a run never reaches (a 429
 * or 409 fails the run). At the default quota a full run's POSTs filled the listed account in its fifth round; the
 * default page budget fits 50 connections of limit=20 pages exactly.
 */
export const SERVICE_ENV: Readonly<Record<string, string>> = {
  LOG_LEVEL: 'info',
  PLANTSTORE_CORS_ORIGINS: CORS_ORIGIN,
  DATABASE_MIGRATE_ON_START: 'false',
  PLANTSTORE_RATE_LIMIT: '1000000/s',
  PLANTSTORE_ACCOUNT_RATE_LIMIT: '1000000/s',
  PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: '999999999',
  PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT: '100000000',
  PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS: '100000000',
}

/** A server started; its label ('reference', 'SQLite plain', 'PostgreSQL on Node 26'…) names its rows. */
export type Server = Awaited<ReturnType<typeof startProcess>>

/** A Node binary (bench/runtimes.ts), its version, what labels its servers (" on Node 26"), their entry points. */
export type Runtime = { node: string; version: string; tag: string; serviceMain: string; plainServer: string }

/** What every server start needs from the harness. */
export type ServerContext = { cpu: number | undefined; tmpDir: string; cleanup: Cleanup }

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })

/** "PostgreSQL plain on Node 26" → "postgresql_plain_on_node_26": for file and schema names. */
export const slug = (label: string): string => label.toLowerCase().replace(/[^a-z0-9]+/g, '_')

/**
 * Starts a server process, `node ...args PORT`, on the servers' core; ready once an authenticated request succeeds.
 * Its stdout (the service's request logs: it is measured with logging on) goes to /dev/null; stderr to a file, read
 * only to explain a failed start.
 */
async function startProcess(label: string, argv: string[], env: object, token: string, context: ServerContext) {
  const [node = '', ...args] = argv
  const port = await freePort()
  const logFile = path.join(context.tmpDir, `${slug(label)}.stderr.log`)
  const stderr = openSync(logFile, 'w')
  const [command, commandArgs] = pinned(context.cpu, node, [...args, String(port)])
  const options = { cwd: REPO_DIR, env: { ...process.env, ...env } }
  const child: ChildProcess = spawn(command, commandArgs, { ...options, stdio: ['ignore', 'ignore', stderr] })
  closeSync(stderr)
  context.cleanup.track(child)
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      const kill = setTimeout(() => child.kill('SIGKILL'), 10_000)
      child.once('exit', () => resolve(clearTimeout(kill)))
      child.kill('SIGTERM')
    })
  context.cleanup.add(`stop ${label}`, stop)
  const url = `http://127.0.0.1:${port}`
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    if (child.exitCode !== null)
      throw new Error(`${label} exited with ${child.exitCode} at start:\n${readFileSync(logFile, 'utf8').trim()}`)
    const page = await getPage(url, token, '/plants?limit=1').catch(() => undefined)
    if (page?.status === 200) return { label, url, pid: child.pid as number, stop }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${label} was not ready within 30 s (stderr in ${logFile})`)
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
  return startProcess('reference', [process.execPath, script], env, token, context)
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
  const env = {
    PLANTSTORE_BENCH_DATABASE: databaseUrl,
    PLANTSTORE_BENCH_ACCOUNT: account,
    PLANTSTORE_BENCH_TOKEN: token,
  }
  return startProcess(label, [runtime.node, runtime.plainServer], env, token, context)
}

/**
 * The built service on a database bulk-seed.ts has filled (`token`: one of its accounts', to check it is ready),
 * as in production: SERVICE_ENV (and `env`) and the node flags of bin/plantstore.js.
 */
export function startService(
  label: string,
  databaseUrl: string,
  token: string,
  context: ServerContext,
  { env = {}, runtime }: { env?: Record<string, string>; runtime?: Runtime } = {},
): Promise<Server> {
  const serve = [runtime?.serviceMain ?? SERVICE_MAIN, 'serve', '--host', '127.0.0.1', '--database', databaseUrl]
  const argv = [runtime?.node ?? process.execPath, ...SERVICE_NODE_FLAGS, ...serve, '--port']
  return startProcess(label, argv, { ...SERVICE_ENV, ...env }, token, context)
}
