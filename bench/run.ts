/**
 * `npm run bench`: the service against a bare node:http reference server, under wrk, in interleaved rounds.
 * See HELP in options.ts for the flags and bench/results.md for the latest figures.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { measureBackupLoad } from './backup-load.js'
import { bulkSeed, type AccountPlan, type SeededAccount } from './bulk-seed.js'
import { Cleanup } from './cleanup.js'
import { BACKENDS, freshDatabase, type Backend } from './databases.js'
import { IdBlocks } from './id-pool.js'
import { detectPinning, machineSummary, pinSelf, requireWrk, wrkVersion, type Pinning } from './machine.js'
import { HELP, parseOptions, type BenchOptions } from './options.js'
import { CATALOGUE, listBody, pageBody } from './plants.js'
import { defaultText } from '../src/config.js'
import { redactUrl } from '../src/redact.js'
import { encodeCursor } from '../src/routes/cursor.js'
import { postgresVersion } from './postgres.js'
import { errorLines, markdownReport, REFERENCE, type Measurement } from './report.js'
import { newTarget, runScenario, runSeconds, type RoundsContext, type Target } from './rounds.js'
import { prepareRuntimes } from './runtimes.js'
import {
  ACCOUNT_NAMES,
  BACKLOG_SUBSCRIPTIONS,
  count,
  LIST_LIMIT,
  LIST_PATH,
  type AccountKey,
  type AccountSizes,
} from './scenarios.js'
import { getPage } from './http.js'
import {
  BENCH_PAGE_ROWS,
  BENCH_PLANT_QUOTA,
  BENCH_RATE_LIMIT,
  SERVICE_NODE_FLAGS,
  REPO_DIR,
  slug,
  startPlain,
  startReference,
  startService,
  type Runtime,
  type ServerContext,
} from './servers.js'
import { measureTransfer, TRANSFER_PLANTS } from './transfer.js'
import { checkTwinWrites, seedTwins, startTwins, type SeededTwins } from './twins.js'
import { startReceiver } from './webhook-receiver.js'

const POSTGRES_URL = process.env.PLANTSTORE_BENCH_POSTGRES_URL || undefined
const BACKENDS_RUN = BACKENDS.filter((backend) => backend === 'SQLite' || POSTGRES_URL !== undefined)

/** Deep-page cursors per account: positions spread evenly across it, the Lua script picks among them at random. */
const DEEP_CURSORS = 1000

/** Rough bulk insert rates (plants/s; queued deliveries/s) on a small machine, for the time estimate only. */
const INSERT_RATE = { SQLite: 300_000, PostgreSQL: 150_000 }
const QUEUE_RATE = { SQLite: 100_000, PostgreSQL: 60_000 }

function log(line: string): void {
  process.stdout.write(line + '\n')
}

/** Whether any chosen scenario runs on the backlog twins. */
function wantsTwins(options: BenchOptions): boolean {
  return options.scenarios.some((s) => s.compare === 'backlog')
}

/** The accounts the chosen reference and size scenarios use (the backlog twins are seeded apart). */
function neededAccounts(options: BenchOptions): AccountKey[] {
  const keys: AccountKey[] = []
  if (options.scenarios.some((s) => s.compare === 'reference')) keys.push('list')
  if (options.scenarios.some((s) => s.compare === 'size')) keys.push('small', 'large')
  return keys
}

/**
 * A server measured beside the reference: the service, or the plain handler (bench/plain-server.ts), on a backend
 * and a Node binary. The service holds every account the chosen scenarios need; the plain handler, there only for
 * the reference scenarios, the listed one.
 */
interface Variant {
  kind: 'service' | 'plain'
  backend: Backend
  runtime: Runtime
  label: string
  accounts: AccountKey[]
}

function variantsFor(options: BenchOptions, runtimes: Runtime[]): Variant[] {
  const accounts = neededAccounts(options)
  // Only the backlog scenarios chosen: their twins are all the services needed.
  if (accounts.length === 0) return []
  const withPlain = accounts.includes('list') ? (['service', 'plain'] as const) : (['service'] as const)
  return runtimes.flatMap((runtime) =>
    BACKENDS_RUN.flatMap((backend) =>
      (runtime.checkout === undefined ? withPlain : (['service'] as const)).map((kind) => ({
        kind,
        backend,
        runtime,
        label: `${backend}${kind === 'plain' ? ' plain' : ''}${runtime.tag}`,
        accounts: kind === 'plain' ? (['list'] as AccountKey[]) : accounts,
      })),
    ),
  )
}

function tokensOf(seeded: SeededAccount[]): Target['tokens'] {
  const tokens: Target['tokens'] = {}
  for (const key of Object.keys(ACCOUNT_NAMES) as AccountKey[]) {
    const account = seeded.find((a) => a.name === ACCOUNT_NAMES[key])
    if (account) tokens[key] = account.token
  }
  return tokens
}

/** Seeds a fresh database for the variant (bench/bulk-seed.ts), then starts it on it; a line for the report. */
async function seededServer(variant: Variant, options: BenchOptions, context: ServerContext) {
  const databaseUrl = await freshDatabase(variant.backend, slug(variant.label), context, POSTGRES_URL)
  const started = performance.now()
  const plans: AccountPlan[] = variant.accounts.map((key) => ({ name: ACCOUNT_NAMES[key], plants: options.sizes[key] }))
  const seeded = await bulkSeed(databaseUrl, plans, variant.runtime.checkout && variant.runtime.serviceMain)
  const seconds = (performance.now() - started) / 1000
  const plants = seeded.map((a) => `${count(a.plants)} in ${a.insertSeconds.toFixed(1)} s`).join(', ')
  const how =
    variant.backend === 'SQLite'
      ? 'one prepared INSERT run per plant in one transaction (better-sqlite3)'
      : 'one INSERT … SELECT FROM generate_series per account, then VACUUM (ANALYZE) plants (what autovacuum would soon do)'
  const line = `${variant.label}: ${how}; plants inserted ${plants}; ${seconds.toFixed(1)} s with the CLI calls`
  log(`seeded ${variant.label}: ${plants} (${seconds.toFixed(1)} s in all)`)
  const tokens = tokensOf(seeded)
  const { label, runtime } = variant
  const server =
    variant.kind === 'service'
      ? await startService(label, databaseUrl, seeded[0]?.token ?? '', context, { runtime })
      : await startPlain(label, databaseUrl, ACCOUNT_NAMES.list, tokens.list ?? '', context, runtime)
  return { target: newTarget(server, tokens, databaseUrl), line }
}

/**
 * The reference (when a scenario compares with it), then every variant on a database of its own, seeded before it
 * starts; all on the servers' core. They get ready side by side (the seeding is mostly waiting for CLI processes and
 * the database); all settle before any failure is thrown, so cleanup knows every server and schema.
 */
async function startTargets(options: BenchOptions, context: ServerContext, variants: Variant[]) {
  const starts: Array<Promise<{ target: Target; line?: string }>> = []
  if (neededAccounts(options).includes('list')) {
    const token = randomBytes(32).toString('base64url')
    starts.push(
      startReference(listBody(), token, context).then((server) => ({ target: newTarget(server, { list: token }) })),
    )
  }
  for (const variant of variants) starts.push(seededServer(variant, options, context))
  const settled = await Promise.allSettled(starts)
  const failed = settled.find((result) => result.status === 'rejected')
  if (failed) throw failed.reason
  const started = settled.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  return {
    targets: started.map((s) => s.target),
    seeding: started.flatMap((s) => (s.line === undefined ? [] : [s.line])),
  }
}

/**
 * Everything measured runs on, made ready side by side: the servers of the reference and size scenarios (started),
 * and the backlog twins' databases (seeded, their services start later) with the receiver their subscriptions
 * name. All settle before a failure is thrown, so cleanup knows every server and schema.
 */
async function prepareServers(options: BenchOptions, context: ServerContext, runtimes: Runtime[]) {
  const receiver = wantsTwins(options) ? await startReceiver(context.cleanup) : undefined
  const [started, twins] = await Promise.allSettled([
    startTargets(options, context, variantsFor(options, runtimes)),
    receiver && seedTwins(options.sizes, POSTGRES_URL, receiver, context, runtimes[0]?.tag ?? ''),
  ])
  if (started.status === 'rejected') throw started.reason
  if (twins.status === 'rejected') throw twins.reason
  if (twins.value !== undefined) log(`seeded the backlog twins: ${twins.value.seeds.length} databases`)
  return { ...started.value, seededTwins: twins.value as SeededTwins | undefined }
}

/** Ids after which the deep pages start: spread evenly from the second page to the one before the last. */
function deepPositions(plants: number): number[] {
  const first = LIST_LIMIT
  const last = plants - LIST_LIMIT - 1
  const n = Math.min(DEEP_CURSORS, last - first + 1)
  if (n <= 1) return [first]
  return Array.from({ length: n }, (_, i) => first + Math.floor((i * (last - first)) / (n - 1)))
}

function cursorPath(after: number): string {
  return `${LIST_PATH}&cursor=${encodeCursor(BigInt(after))}`
}

async function expectPage(target: Target, account: AccountKey, path: string, body: string, link: string | undefined) {
  const label = `${target.server.label}, ${account} account, GET ${path}`
  const page = await getPage(target.server.url, target.tokens[account] ?? '', path)
  if (page.status !== 200) throw new Error(`${label}: ${page.status} ${page.body}`)
  if (page.body !== body) throw new Error(`${label}: other bytes than expected:\n${page.body}\nexpected:\n${body}`)
  if (page.link !== link) throw new Error(`${label}: Link ${page.link ?? '(none)'}, expected ${link ?? '(none)'}`)
}

/**
 * Before measuring, on every service and account: the first page is the expected bytes (for the listed account,
 * byte for byte the reference's list body, so GETs compare like with like) and links to the next page with the
 * cursor the harness encodes (src/routes/cursor.ts), so the deep pages' cursors are ones the service issues; a
 * deep page and the last page (no Link: the account holds exactly plants 1..n) are the expected bytes too.
 */
async function checkPages(targets: Target[], sizes: AccountSizes): Promise<void> {
  const reference = targets.find((t) => t.server.label === REFERENCE)
  const referenceBody = reference && (await getPage(reference.server.url, reference.tokens.list ?? '', LIST_PATH)).body
  for (const target of targets.filter((t) => t.pool !== undefined)) {
    for (const account of Object.keys(target.tokens) as AccountKey[]) {
      const plants = sizes[account]
      const first = account === 'list' && referenceBody !== undefined ? referenceBody : pageBody(0)
      await expectPage(target, account, LIST_PATH, first, `<${cursorPath(LIST_LIMIT)}>; rel="next"`)
      const positions = deepPositions(plants)
      const deep = positions[Math.floor(positions.length / 2)] ?? LIST_LIMIT
      await expectPage(
        target,
        account,
        cursorPath(deep),
        pageBody(deep),
        `<${cursorPath(deep + LIST_LIMIT)}>; rel="next"`,
      )
      await expectPage(target, account, cursorPath(plants - LIST_LIMIT), pageBody(plants - LIST_LIMIT), undefined)
    }
  }
}

/** What the chosen scenarios will take, roughly: seeding, then every run. */
function estimateSeconds(options: BenchOptions): { seeding: number; runs: number } {
  const { list, backlog } = options.sizes
  const nodes = 1 + options.nodes.length
  const builds = nodes + options.services.length
  const twins = wantsTwins(options) ? 2 : 0
  const accounts = neededAccounts(options)
  // Per backend: each service's accounts, and each plain handler's (one per Node) listed one.
  const perService = accounts.reduce((sum, key) => sum + options.sizes[key], 0)
  const plants = builds * perService + (accounts.includes('list') ? nodes * list : 0) + twins * (list + backlog)
  const queued = wantsTwins(options) ? backlog * BACKLOG_SUBSCRIPTIONS : 0
  // Side by side (startTargets, seedTwins): the slower backend sets the time.
  const seeding = Math.max(
    ...BACKENDS_RUN.map((backend) => 3 + 3 * twins + plants / INSERT_RATE[backend] + queued / QUEUE_RATE[backend]),
  )
  const servers = { reference: 1 + (nodes + builds) * BACKENDS_RUN.length, size: 2 * builds * BACKENDS_RUN.length }
  const runs = options.scenarios.reduce((sum, scenario) => {
    const perRound = scenario.compare === 'backlog' ? 2 * BACKENDS_RUN.length : servers[scenario.compare]
    return sum + options.rounds * perRound * (options.warmup + runSeconds(scenario, options))
  }, 0)
  // bench/backup-load.ts seeds a store of its own and runs two runs per round.
  if (options.backupLoad) {
    return {
      seeding: seeding + options.sizes.large / INSERT_RATE.SQLite,
      runs: runs + options.rounds * 2 * (options.warmup + options.duration + 1),
    }
  }
  return { seeding, runs }
}

function duration(seconds: number): string {
  return seconds < 90 ? `${Math.round(seconds)} s` : `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`
}

function commandLine(options: BenchOptions): string {
  const args = options.args.join(' ')
  const prefix = POSTGRES_URL ? `PLANTSTORE_BENCH_POSTGRES_URL=${redactUrl(POSTGRES_URL)} ` : ''
  if (process.env.npm_lifecycle_event === 'bench') return `${prefix}npm run bench${args ? ` -- ${args}` : ''}`
  return `${prefix}node --import tsx bench/run.ts ${args}`.trim()
}

function modeLine(options: BenchOptions): string {
  const kind = options.quick ? 'quick (smoke test, not a measurement)' : 'full'
  const warmup = options.warmup === 0 ? 'no warm-up' : `${options.warmup} s warm-up`
  return (
    `${kind}: ${options.rounds} rounds; per server per scenario per round ${warmup} then ${options.duration} s ` +
    `measured (size scenarios: per service per account ${options.sizeDuration} s); ${options.connections} ` +
    `connections, ${options.threads === 1 ? '1 wrk thread' : `${options.threads} wrk threads`}`
  )
}

/** Each service's label → the plain handler's of the same backend and Node. */
function plainOf(variants: Variant[]): Record<string, string> {
  const plain: Record<string, string> = {}
  for (const service of variants.filter((v) => v.kind === 'service')) {
    const handler = variants.find(
      (v) => v.kind === 'plain' && v.backend === service.backend && v.runtime.node === service.runtime.node,
    )
    if (handler !== undefined) plain[service.label] = handler.label
  }
  return plain
}

/** How every service's database was filled, whatever the backend. */
function seedingLines(options: BenchOptions): string[] {
  const keys = neededAccounts(options)
  // The backlog twins hold the listed account too (and the other one, seeded as their own line says).
  if (wantsTwins(options) && !keys.includes('list')) keys.unshift('list')
  const accounts = keys.map((key) => `${ACCOUNT_NAMES[key]} (${count(options.sizes[key])} plants)`)
  const untagged = CATALOGUE.filter((entry) => entry.tag === undefined).length
  return [
    "Before each service starts, a database of its own gets the schema from the service's CLI (`plantstore migrate " +
      '--database URL`; the service then starts with DATABASE_MIGRATE_ON_START=false) and a token per account ' +
      `from \`plantstore tokens create --account NAME\`: ${accounts.join(', ')}. Then bench/bulk-seed.ts inserts ` +
      "each account's plants 1..n with SQL, straight into the database (the API would take minutes to hours). " +
      "Each plain handler's database is seeded the same way with the listed account only; the handler accepts " +
      'that token alone.',
    `Plants are what bench/plants.ts gives for each id, the rule the Lua scripts follow for the plants they POST too: ` +
      `${CATALOGUE.length} house and garden plants (botanical names, cultivars) in turn, ${untagged} of them untagged.`,
    'Checked before measuring, on every service, plain handler and account: the first page is the expected bytes (for the listed ' +
      "account, byte for byte the reference server's list body) and its Link header holds the cursor the harness " +
      'encodes with src/routes/cursor.ts for the deep pages; a deep page and the last page (no Link) are the ' +
      `expected bytes too. The size-deep script picks among ${DEEP_CURSORS} (fewer in a small account) cursors ` +
      'spread evenly from the second page to the one before the last.',
  ]
}

function serviceLine(): string {
  const git = (args: string[]): string => execFileSync('git', args, { cwd: REPO_DIR, encoding: 'utf8' }).trim()
  const dirty = git(['status', '--porcelain', '--', 'src']) === '' ? '' : ' with uncommitted changes in src/'
  return (
    `commit ${git(['rev-parse', '--short', 'HEAD'])}${dirty}, built to dist/ and run with node ${SERVICE_NODE_FLAGS.join(' ')} (bin/plantstore.js's flags); ` +
    `LOG_LEVEL=info with the logs sent to /dev/null; PLANTSTORE_RATE_LIMIT and PLANTSTORE_ACCOUNT_RATE_LIMIT=${BENCH_RATE_LIMIT} and PLANTSTORE_MAX_PLANTS_PER_ACCOUNT=${BENCH_PLANT_QUOTA} and PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT and _PER_PROCESS=${BENCH_PAGE_ROWS} (on, never reached); DATABASE_POOL_SIZE=${process.env.DATABASE_POOL_SIZE || `${defaultText('DATABASE_POOL_SIZE')} (default)`}`
  )
}

/** The other checkouts' services (--service), each run as this checkout's is but from its own build. */
function checkoutText(runtimes: Runtime[]): string {
  const builds = runtimes.filter((runtime) => runtime.checkout !== undefined)
  const each = (runtime: Runtime) =>
    `"${runtime.tag.trim()}": ${runtime.checkout}'s dist/ and node_modules, with node ${runtime.nodeFlags.join(' ')}`
  return builds.length === 0 ? '' : `; beside it, the services labelled ${builds.map(each).join('; ')}`
}

/** Which Node ran what: the first on PATH runs the harness, the reference and the twins, each --node its variants. */
function nodeText(runtimes: Runtime[]): string {
  const [first, ...others] = runtimes.filter((runtime) => runtime.checkout === undefined)
  if (first === undefined || others.length === 0) return `Node ${process.version} (the first node on PATH)`
  const labelled = (runtime: Runtime) => `the services and plain handlers labelled "${runtime.tag.trim()}"`
  return [
    `Node ${first.version} (the first node on PATH: the harness, the reference, the backlog twins and ${labelled(first)})`,
    ...others.map((runtime) => `Node ${runtime.version} (${runtime.node}: ${labelled(runtime)})`),
  ].join(', ')
}

async function softwareLine(runtimes: Runtime[]): Promise<string> {
  const parts = [nodeText(runtimes), wrkVersion()]
  if (POSTGRES_URL) {
    // Its processes run wherever the scheduler puts them: on the servers' core they count as "other".
    parts.push(`${await postgresVersion(POSTGRES_URL)} (same machine, not pinned, its memory not in peak RSS)`)
  }
  return parts.join(', ')
}

async function measure(options: BenchOptions, pinning: Pinning, cleanup: Cleanup): Promise<number> {
  const started = performance.now()
  const loadBefore = os.loadavg()[0] ?? 0
  const service = serviceLine() // at the start: the code measured, whatever is committed meanwhile
  const estimate = estimateSeconds(options)
  log(
    `bench: estimated ~${duration(estimate.seeding + estimate.runs)}: seeding and starts ~${duration(estimate.seeding)}, ` +
      `measuring ${options.scenarios.map((s) => s.name).join(', ')} ~${duration(estimate.runs)}`,
  )
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-'))
  cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
  const serverContext: ServerContext = { cpu: pinning.serverCpu, tmpDir, cleanup }
  const runtimes = await prepareRuntimes(options.nodes, serverContext, log, options.services)
  const { targets, seeding, seededTwins } = await prepareServers(options, serverContext, runtimes)
  await checkPages(targets, options.sizes)
  // Export and import (bench/transfer.ts), unpinned as the seeding is, while the servers wait.
  const transfer = await measureTransfer(
    TRANSFER_PLANTS[options.quick ? 'quick' : 'full'],
    POSTGRES_URL,
    serverContext,
    log,
  )
  // Only now: seeding used both cores (the CLI processes, the SQLite inserts) while no server was measured.
  pinSelf(pinning)
  log(`pages checked; seeding and starts took ${duration((performance.now() - started) / 1000)}`)
  const notes = [
    `load average (1 min) before the servers started: ${loadBefore.toFixed(2)} on ${os.cpus().length} cores`,
    ...transfer,
  ]

  const cursors: RoundsContext['cursors'] = {}
  for (const account of ['small', 'large'] as const) {
    cursors[account] = deepPositions(options.sizes[account])
      .map((after) => encodeCursor(BigInt(after)))
      .join(',')
  }
  const context: RoundsContext = {
    options,
    cursors,
    serverCpu: pinning.serverCpu,
    loadCpu: pinning.loadCpu,
    blocks: new IdBlocks(),
    log,
  }
  const measurements: Measurement[] = []
  let twins: Awaited<ReturnType<typeof startTwins>> | undefined
  for (const scenario of options.scenarios) {
    if (scenario.compare === 'backlog' && twins === undefined && seededTwins !== undefined) {
      twins = await startTwins(seededTwins, options.sizes, serverContext)
      await checkPages(twins.targets, options.sizes)
      log(`backlog twins started, pages checked: ${twins.targets.map((t) => t.server.label).join(', ')}`)
    }
    const on = scenario.compare === 'backlog' ? (twins?.targets ?? []) : targets
    measurements.push(...(await runScenario(scenario, on, context)))
  }
  const sections = options.backupLoad ? await measureBackupLoad(context, serverContext) : []
  const writes = twins && (await checkTwinWrites(twins.targets, options.sizes))
  if (writes !== undefined) {
    notes.push(`writes checked after the backlog scenarios, each twin stopped first: ${writes.lines.join('; ')}`)
  }
  const topUps = targets.filter((t) => t.seededToDelete > 0).map((t) => `${t.seededToDelete} on ${t.server.label}`)
  if (topUps.length > 0) {
    seeding.push(
      `Plants the delete scenario needed beyond those post and mix created were inserted the same way between ` +
        `runs (ids far above the seeded ones; the service idle): ${topUps.join(', ')}.`,
    )
  }
  const took = duration((performance.now() - started) / 1000)
  notes.push(`the run took ${took} (estimated ~${duration(estimate.seeding + estimate.runs)})`)

  const report = {
    date: new Date(),
    command: commandLine(options),
    mode: modeLine(options),
    machine: machineSummary(),
    software: await softwareLine(runtimes),
    pinning: pinning.note,
    service: service + checkoutText(runtimes),
    sizes: options.sizes,
    scenarios: options.scenarios,
    servers: [...targets, ...(twins?.targets ?? [])].map((t) => t.server.label),
    plain: plainOf(variantsFor(options, runtimes)),
    twins: twins?.pairs ?? [],
    measurements,
    seeding: [...seedingLines(options), ...seeding, ...(seededTwins?.lines ?? [])],
    notes,
    problems: writes?.problems ?? [],
    sections,
  }
  const markdown = markdownReport(report)
  writeFileSync(path.resolve(REPO_DIR, options.out), markdown)
  log(`\n${markdown}\nwritten to ${options.out}; took ${took}`)
  return reportErrors(measurements, report.problems)
}

/** Errors and lost writes make the run fail (exit 1), loudly, after the report is written. */
function reportErrors(measurements: Measurement[], problems: string[]): number {
  const errors = errorLines(measurements)
  if (errors.length > 0) {
    process.stderr.write(
      `\nbench: !! ${errors.length} measured runs had errors:\n${errors.map((e) => `  ${e}\n`).join('')}`,
    )
  }
  for (const problem of problems) process.stderr.write(`\nbench: !! ${problem}\n`)
  return errors.length > 0 || problems.length > 0 ? 1 : 0
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (options === 'help') return log(HELP)
  requireWrk()
  const cleanup = new Cleanup()
  const pinning = detectPinning()
  log(`bench: ${pinning.note}; reference server = "${REFERENCE}"`)
  try {
    process.exitCode = await measure(options, pinning, cleanup)
  } finally {
    await cleanup.run()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = 1
})
