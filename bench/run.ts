/** `npm run bench`: the method is bench/README.md's, the flags HELP's in options.ts. */
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { redactUrl } from '../src/redact.js'
import { startBackupLoad } from './backup-load.js'
import { bulkSeed } from './bulk-seed.js'
import { Cleanup, settleAll } from './cleanup.js'
import { BACKENDS, freshDatabase, queryRows, type Backend } from './databases.js'
import { detectPinning, pinSelf, WRK, type Pinning } from './machine.js'
import { HELP, parseOptions, type BenchOptions } from './options.js'
import { checkPages, DEEP_CURSORS, deepCursors } from './page-checks.js'
import { CATALOGUE, pageBody } from './plants.js'
import { errorLines, markdownReport } from './report.js'
import type { Measurement } from './report-rows.js'
import { newTarget, runScenario, type Pair, type RoundsContext, type Target } from './rounds.js'
import { prepareRuntimes } from './runtimes.js'
import { ACCOUNT_NAMES, count, type AccountKey, type Scenario } from './scenarios.js'
import {
  CORS_ORIGIN,
  REPO_DIR,
  SERVICE_ENV,
  SERVICE_NODE_FLAGS,
  slug,
  startPlain,
  startReference,
  startService,
} from './servers.js'
import type { Runtime, ServerContext } from './servers.js'
import { checkTwinWrites, startTwins } from './twins.js'

const POSTGRES_URL = process.env.PLANTSTORE_BENCH_POSTGRES_URL || undefined
const BACKENDS_RUN = BACKENDS.filter((backend) => backend === 'SQLite' || POSTGRES_URL !== undefined)

const log = (line: string): void => void process.stdout.write(line + '\n')
const took = (since: number) => `${Math.round((performance.now() - since) / 1000)} s`

/** An OTLP collector in the harness that takes every export at once, for the traced services. */
async function traceCollector(context: ServerContext): Promise<string> {
  const sink = createServer((req, res) => void req.resume().on('end', () => res.end('{}')))
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve))
  context.cleanup.add('stop the trace collector', () => (sink.closeAllConnections(), sink.close()))
  return `http://127.0.0.1:${(sink.address() as AddressInfo).port}`
}

/**
 * The pair scenarios on the services themselves: each service of the first Node beside the same server sent a header
 * (issue 30: an allowed Origin, or a key of its own per POST), or a twin on its database traced (issue 31).
 */
async function variantPairs(targets: Target[], uses: (kind: Scenario['compare']) => boolean, context: ServerContext) {
  const endpoint = uses('tracing') ? await traceCollector(context) : ''
  const plans: Array<[Scenario['compare'], string, Record<string, string>]> = [
    ['cors', 'with Origin', { PLANTSTORE_BENCH_ORIGIN: CORS_ORIGIN }],
    ['idempotency', 'with Idempotency-Key', { PLANTSTORE_BENCH_KEYED: '1' }],
    ['tracing', 'traced', { OTEL_TRACES_SAMPLER: 'always_on' }],
    ['tracing', 'traced 1%', { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' }],
  ]
  const on: Partial<Record<Scenario['compare'], Target[]>> = {}
  const pairs: Pair[] = []
  for (const [kind, what, env] of plans.filter(([kind]) => uses(kind))) {
    for (const s of targets.filter((t) => BACKENDS_RUN.some((b) => b === t.server.label))) {
      const [label, { databaseUrl, tokens }] = [`${s.server.label} ${what}`, s]
      const otel = { env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, ...env } }
      const twin = kind === 'tracing' && (await startService(label, databaseUrl!, tokens.list!, context, otel))
      pairs.push({ name: label, without: s.server.label, with: label })
      const variant = twin ? newTarget(twin, tokens, databaseUrl) : { ...s, server: { ...s.server, label }, env }
      ;(on[kind] ??= []).push(s, variant)
    }
  }
  return { targets: on, pairs }
}

/** A service or a plain handler, on a backend and a Node, and the accounts its database holds. */
type Variant = { kind: 'service' | 'plain'; backend: Backend; runtime: Runtime; label: string; accounts: AccountKey[] }

/** Seeds a fresh database for the variant (bench/bulk-seed.ts), then starts it on it. */
async function seededServer(variant: Variant, options: BenchOptions, context: ServerContext): Promise<Target> {
  const { kind, backend, runtime, label, accounts } = variant
  const databaseUrl = await freshDatabase(backend, slug(label), context, POSTGRES_URL)
  const plans = accounts.map((key) => ({ name: ACCOUNT_NAMES[key], plants: options.sizes[key] }))
  const seeded = await bulkSeed(databaseUrl, plans)
  log(`seeded ${label}: ${seeded.map((a) => `${count(a.plants)} plants`).join(', ')}`)
  const tokens = Object.fromEntries(accounts.map((key, i) => [key, seeded[i]?.token]))
  const token = seeded[0]?.token ?? ''
  const server =
    kind === 'plain'
      ? await startPlain(label, databaseUrl, ACCOUNT_NAMES.list, token, context, runtime)
      : await startService(label, databaseUrl, token, context, { runtime })
  return newTarget(server, tokens, databaseUrl)
}

const POSTGRES_FACTS = `select split_part(version(), ' on ', 1) || ', autovacuum ' || current_setting('autovacuum') AS v`
const postgresVersion = async (url: string) => (await queryRows<{ v: string }>(url, POSTGRES_FACTS))[0]?.v

/** The run's facts for the report: the command, its mode, the machine, and which code and software ran. */
async function runFacts(options: BenchOptions, pinning: Pinning, runtimes: Runtime[], postgresUrl?: string) {
  const git = (args: string[]) => execFileSync('git', args, { cwd: REPO_DIR, encoding: 'utf8' }).trim()
  const dirty = git(['status', '--porcelain', '--', 'src']) === '' ? '' : ' with uncommitted changes in src/'
  const tag = (r: Runtime, i: number) => `${i === 0 ? 'first on PATH' : r.node}${r.tag && `: "${r.tag.trim()}"`}`
  const wrk = spawnSync(WRK, ['-v'], { encoding: 'utf8' })
  const software = [
    ...runtimes.map((r, i) => `Node ${r.version} (${tag(r, i)})`),
    (wrk.stdout + wrk.stderr).split(' Copyright')[0]?.trim(),
    ...(postgresUrl ? [`${await postgresVersion(postgresUrl)} (same machine, not pinned, not in peak RSS)`] : []),
  ]
  const command = `${postgresUrl ? `PLANTSTORE_BENCH_POSTGRES_URL=${redactUrl(postgresUrl)} ` : ''}npm run bench`
  const env = Object.entries(SERVICE_ENV).map(([key, value]) => `${key}=${value}`)
  const { quick, rounds, warmup, duration, sizeDuration, connections } = options
  return [
    `Date: ${new Date().toISOString()}`,
    `Command: \`${command}${options.args.length > 0 ? ` -- ${options.args.join(' ')}` : ''}\``,
    `Mode: ${quick ? 'quick (smoke test, not a measurement)' : 'full'}: ${rounds} rounds; per server, scenario and ` +
      `round ${warmup} s warm-up then ${duration} s measured (size scenarios: ${sizeDuration} s per account); ` +
      `${connections} connections, 1 wrk thread`,
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}), ${(os.totalmem() / 2 ** 30).toFixed(0)} ` +
      `GiB RAM, ${os.type()} ${os.release()}; load average (1 min) before the servers started: ${os.loadavg()[0]?.toFixed(2)}`,
    `Pinning: ${pinning.note}`,
    `Software: ${software.join(', ')}`,
    `Service: commit ${git(['rev-parse', '--short', 'HEAD'])}${dirty}, dist/ run with node ` +
      `${SERVICE_NODE_FLAGS.join(' ')}; ${env.join(' ')} (logs to /dev/null; limits on, never reached)`,
  ]
}

async function measure(options: BenchOptions, cleanup: Cleanup): Promise<number> {
  const started = performance.now()
  const pinning = detectPinning()
  log(`bench: ${pinning.note}`)
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-'))
  cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
  const serverContext: ServerContext = { cpu: pinning.serverCpu, tmpDir, cleanup }
  const runtimes = await prepareRuntimes(options.nodes, serverContext, log)
  const facts = await runFacts(options, pinning, runtimes, POSTGRES_URL)
  const uses = (kind: Scenario['compare']) => options.scenarios.some((s) => s.compare === kind)

  // Everything is seeded and started side by side (mostly waiting for CLI processes and the database), but for
  // the backlog twins (bench/twins.ts): the reference, then per Node and backend the service, holding every
  // account the scenarios need, and the plain handler (bench/plain-server.ts) with the listed one.
  const starts: Array<Promise<Target>> = []
  const plain: Record<string, string> = {}
  if (uses('reference')) {
    const token = randomBytes(32).toString('base64url')
    starts.push(startReference(pageBody(0), token, serverContext).then((server) => newTarget(server, { list: token })))
  }
  const headed = uses('cors') || uses('idempotency') || uses('tracing')
  const accounts: AccountKey[] = [
    ...(uses('reference') || headed ? ['list' as const] : []),
    ...(uses('size') ? (['small', 'large'] as const) : []),
  ]
  for (const runtime of accounts.length > 0 ? runtimes : []) {
    for (const backend of BACKENDS_RUN) {
      const label = `${backend}${runtime.tag}`
      starts.push(seededServer({ kind: 'service', backend, runtime, label, accounts }, options, serverContext))
      if (!uses('reference')) continue
      plain[label] = `${backend} plain${runtime.tag}`
      const variant: Variant = { kind: 'plain', backend, runtime, label: plain[label], accounts: ['list'] }
      starts.push(seededServer(variant, options, serverContext))
    }
  }
  const backups = uses('backup') ? startBackupLoad(options.sizes.large, serverContext) : undefined
  await settleAll<unknown>(backups ? [...starts, backups] : starts)
  const targets = await Promise.all(starts)
  const variants = headed ? await variantPairs(targets, uses, serverContext) : undefined
  await checkPages(targets, options.sizes)
  // Only now: seeding used both cores while no server was measured.
  pinSelf(pinning)
  log(`pages checked; seeding and starts took ${took(started)}`)

  const cursors = { small: deepCursors(options.sizes.small), large: deepCursors(options.sizes.large) }
  const context: RoundsContext = { options, cursors, pinning, log }
  const measurements: Measurement[] = []
  let twins: Awaited<ReturnType<typeof startTwins>> | undefined
  for (const scenario of options.scenarios) {
    if (scenario.compare === 'backlog' && twins === undefined) {
      twins = await startTwins(BACKENDS_RUN, options.sizes, POSTGRES_URL, serverContext, runtimes[0]?.tag ?? '')
      await checkPages(twins.targets, options.sizes)
      log(`backlog twins started, pages checked: ${twins.targets.map((t) => t.server.label).join(', ')}`)
    }
    const on = {
      ...{ reference: targets, size: targets, backlog: twins?.targets, backup: (await backups)?.targets },
      ...variants?.targets,
    }
    measurements.push(...(await runScenario(scenario, on[scenario.compare] ?? [], context)))
  }
  const writes = twins && (await checkTwinWrites(twins.targets, options.sizes))
  const topUps = targets
    .filter((t) => t.seededToDelete > 0)
    .map((t) => `${count(t.seededToDelete)} on ${t.server.label}`)
  const notes = [
    `plants 1..n per account with SQL (bench/bulk-seed.ts; bench/plants.ts's ${CATALOGUE.length} plants in turn); ` +
      `pages checked byte for byte before measuring; size-deep picks among ${DEEP_CURSORS} cursors per account`,
    ...(twins ? [twins.line] : []),
    ...(writes ? [writes.note] : []),
    ...(backups ? [(await backups).note()] : []),
    ...(topUps.length > 0 ? [`plants inserted with SQL for the delete runs, between runs: ${topUps.join(', ')}`] : []),
    `the run took ${took(started)}`,
  ]
  const markdown = markdownReport({
    facts,
    sizes: options.sizes,
    scenarios: options.scenarios,
    servers: targets.map((t) => t.server.label),
    plain,
    pairs: [...(twins?.pairs ?? []), ...((await backups)?.pairs ?? []), ...(variants?.pairs ?? [])],
    measurements,
    notes,
    problems: writes?.problems ?? [],
  })
  writeFileSync(path.resolve(REPO_DIR, options.out), markdown)
  log(`\n${markdown}\nwritten to ${options.out}; took ${took(started)}`)
  // Errors and lost writes make the run fail (exit 1), loudly, after the report is written.
  const failures = [...errorLines(measurements), ...(writes?.problems ?? [])]
  for (const failure of failures) process.stderr.write(`bench: !! ${failure}\n`)
  return failures.length > 0 ? 1 : 0
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (options === 'help') return log(HELP)
  if (!existsSync(WRK)) throw new Error(`wrk not found at ${WRK}; install wrk: sudo apt-get install wrk`)
  const cleanup = new Cleanup()
  try {
    process.exitCode = await measure(options, cleanup)
  } finally {
    await cleanup.run()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = 1
})
