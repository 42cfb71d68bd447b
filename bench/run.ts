/** `npm run bench`: the method is bench/README.md's, the flags HELP's in options.ts. */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { defaultText } from '../src/config.js'
import { redactUrl } from '../src/redact.js'
import { encodeCursor } from '../src/routes/cursor.js'
import { measureBackupLoad } from './backup-load.js'
import { bulkSeed, type AccountPlan } from './bulk-seed.js'
import { Cleanup, settleAll } from './cleanup.js'
import { BACKENDS, freshDatabase, postgresVersion, type Backend } from './databases.js'
import { getPage } from './http.js'
import { IdBlocks } from './id-pool.js'
import { detectPinning, machineSummary, pinSelf, requireWrk, wrkVersion, type Pinning } from './machine.js'
import { HELP, parseOptions, type BenchOptions } from './options.js'
import { CATALOGUE, pageBody } from './plants.js'
import { errorLines, markdownReport } from './report.js'
import { REFERENCE, type Measurement } from './report-rows.js'
import { newTarget, runScenario, type RoundsContext, type Target } from './rounds.js'
import { prepareRuntimes } from './runtimes.js'
import { ACCOUNT_NAMES, count, LIST_LIMIT, LIST_PATH, type AccountKey, type AccountSizes } from './scenarios.js'
import { REPO_DIR, SERVICE_ENV, SERVICE_NODE_FLAGS, slug, startPlain, startReference, startService } from './servers.js'
import type { Runtime, ServerContext } from './servers.js'
import { measureTransfer, TRANSFER_PLANTS } from './transfer.js'
import { checkTwinWrites, seedTwins, startTwins } from './twins.js'

const POSTGRES_URL = process.env.PLANTSTORE_BENCH_POSTGRES_URL || undefined
const BACKENDS_RUN = BACKENDS.filter((backend) => backend === 'SQLite' || POSTGRES_URL !== undefined)

/** Deep-page cursors per account: positions spread evenly across it, the Lua script picks among them at random. */
const DEEP_CURSORS = 1000

const log = (line: string): void => void process.stdout.write(line + '\n')

/** The accounts the chosen reference and size scenarios use (the backlog twins are seeded apart). */
function neededAccounts(options: BenchOptions): AccountKey[] {
  const uses = (kind: string) => options.scenarios.some((s) => s.compare === kind)
  return [...(uses('reference') ? ['list' as const] : []), ...(uses('size') ? (['small', 'large'] as const) : [])]
}

/**
 * A server measured beside the reference: a service, or a plain handler (bench/plain-server.ts), on a backend and
 * a runtime. The service holds every account the scenarios need; the plain handler, the listed one.
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
  const plain = accounts.includes('list')
  return runtimes.flatMap((runtime) =>
    BACKENDS_RUN.flatMap((backend) => {
      const service = { kind: 'service' as const, backend, runtime, label: `${backend}${runtime.tag}`, accounts }
      if (accounts.length === 0) return []
      if (!plain || runtime.checkout !== undefined) return [service]
      return [
        service,
        { ...service, kind: 'plain' as const, label: `${backend} plain${runtime.tag}`, accounts: ['list' as const] },
      ]
    }),
  )
}

/** Seeds a fresh database for the variant (bench/bulk-seed.ts), then starts it on it; a line for the report. */
async function seededServer(variant: Variant, options: BenchOptions, context: ServerContext) {
  const databaseUrl = await freshDatabase(variant.backend, slug(variant.label), context, POSTGRES_URL)
  const started = performance.now()
  const plans: AccountPlan[] = variant.accounts.map((key) => ({ name: ACCOUNT_NAMES[key], plants: options.sizes[key] }))
  const seeded = await bulkSeed(databaseUrl, plans, variant.runtime.checkout && variant.runtime.serviceMain)
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  const plants = seeded.map((a) => `${count(a.plants)} in ${a.insertSeconds.toFixed(1)} s`).join(', ')
  log(`seeded ${variant.label}: ${plants} (${seconds} s in all)`)
  const tokens: Target['tokens'] = {}
  for (const key of variant.accounts) tokens[key] = seeded.find((a) => a.name === ACCOUNT_NAMES[key])?.token
  const { label, runtime } = variant
  const server =
    variant.kind === 'service'
      ? await startService(label, databaseUrl, seeded[0]?.token ?? '', context, { runtime })
      : await startPlain(label, databaseUrl, ACCOUNT_NAMES.list, tokens.list ?? '', context, runtime)
  return {
    target: newTarget(server, tokens, databaseUrl),
    line: `${label}: plants inserted ${plants}; ${seconds} s with the CLI calls`,
  }
}

/**
 * Everything measured runs on, made ready side by side (seeding is mostly waiting for CLI processes and the
 * database): the reference, every variant on a database of its own, and the backlog twins' databases (their
 * services start later).
 */
async function prepareServers(options: BenchOptions, context: ServerContext, runtimes: Runtime[]) {
  const starts: Array<Promise<{ target: Target; line?: string }>> = []
  if (neededAccounts(options).includes('list')) {
    const token = randomBytes(32).toString('base64url')
    starts.push(
      startReference(pageBody(0), token, context).then((server) => ({ target: newTarget(server, { list: token }) })),
    )
  }
  for (const variant of variantsFor(options, runtimes)) starts.push(seededServer(variant, options, context))
  const wantsTwins = options.scenarios.some((s) => s.compare === 'backlog')
  const twins = wantsTwins ? seedTwins(options.sizes, POSTGRES_URL, context, runtimes[0]?.tag ?? '') : undefined
  await settleAll<unknown>(twins ? [...starts, twins] : starts)
  const started = await Promise.all(starts)
  const seededTwins = await twins
  if (seededTwins !== undefined) log(`seeded the backlog twins: ${seededTwins.seeds.length} databases`)
  return { targets: started.map((s) => s.target), seeding: started.flatMap((s) => s.line ?? []), seededTwins }
}

/** Ids after which the deep pages start: spread evenly from the second page to the one before the last. */
function deepPositions(plants: number): number[] {
  const [first, last] = [LIST_LIMIT, plants - LIST_LIMIT - 1]
  const n = Math.min(DEEP_CURSORS, last - first + 1)
  if (n <= 1) return [first]
  return Array.from({ length: n }, (_, i) => first + Math.floor((i * (last - first)) / (n - 1)))
}

const cursorPath = (after: number) => `${LIST_PATH}&cursor=${encodeCursor(BigInt(after))}`

/**
 * Before measuring, on every service, plain handler and account: the first page is the expected bytes (the
 * listed account's, byte for byte the reference's body) and links to the next page with the cursor the harness
 * encodes (src/routes/cursor.ts), so the deep pages' cursors are ones the service issues; a deep page and the last
 * page (no Link: the account holds exactly plants 1..n) are the expected bytes too.
 */
async function checkPages(targets: Target[], sizes: AccountSizes): Promise<void> {
  const reference = targets.find((t) => t.server.label === REFERENCE)
  const referenceBody = reference && (await getPage(reference.server.url, reference.tokens.list, LIST_PATH)).body
  for (const target of targets.filter((t) => t.pool !== undefined)) {
    for (const account of Object.keys(target.tokens) as AccountKey[]) {
      const positions = deepPositions(sizes[account])
      const deep = positions[Math.floor(positions.length / 2)] ?? LIST_LIMIT
      const last = sizes[account] - LIST_LIMIT
      const first = account === 'list' && referenceBody !== undefined ? referenceBody : pageBody(0)
      const pages: Array<[string, string, string | undefined]> = [
        [LIST_PATH, first, `<${cursorPath(LIST_LIMIT)}>; rel="next"`],
        [cursorPath(deep), pageBody(deep), `<${cursorPath(deep + LIST_LIMIT)}>; rel="next"`],
        [cursorPath(last), pageBody(last), undefined],
      ]
      for (const [path, body, link] of pages) {
        const label = `${target.server.label}, ${account} account, GET ${path}`
        const page = await getPage(target.server.url, target.tokens[account], path)
        if (page.status !== 200) throw new Error(`${label}: ${page.status} ${page.body}`)
        if (page.body !== body)
          throw new Error(`${label}: other bytes than expected:\n${page.body}\nexpected:\n${body}`)
        if (page.link !== link) throw new Error(`${label}: Link ${page.link ?? '(none)'}, expected ${link ?? '(none)'}`)
      }
    }
  }
}

const duration = (seconds: number) =>
  seconds < 90 ? `${Math.round(seconds)} s` : `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`

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
    'connections, 1 wrk thread'
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

/** How the databases were filled and checked (bench/README.md has the method). */
function seedingLines(options: BenchOptions): string[] {
  const accounts = neededAccounts(options).map((key) => `${ACCOUNT_NAMES[key]} ${count(options.sizes[key])}`)
  return [
    "Schema and a token per account by the service's CLI (the service then starts with DATABASE_MIGRATE_ON_START=" +
      `false), plants 1..n per account with SQL (bench/bulk-seed.ts): ${accounts.join(', ')}; a plain handler's ` +
      `database holds the listed account only. Plants are bench/plants.ts's ${CATALOGUE.length} plants in turn.`,
    'Checked before measuring on every service, plain handler and account: the first, a deep and the last page are ' +
      "the expected bytes with the expected Link cursors (the listed account's first page: the reference's body). " +
      `size-deep picks among ${DEEP_CURSORS} cursors (fewer in a small account) spread across the account.`,
  ]
}

/** The code measured, at the start (whatever is committed meanwhile), and how it runs. */
function serviceLine(): string {
  const git = (args: string[]): string => execFileSync('git', args, { cwd: REPO_DIR, encoding: 'utf8' }).trim()
  const dirty = git(['status', '--porcelain', '--', 'src']) === '' ? '' : ' with uncommitted changes in src/'
  const env = Object.entries(SERVICE_ENV).map(([key, value]) => `${key}=${value}`)
  const pool = process.env.DATABASE_POOL_SIZE || `${defaultText('DATABASE_POOL_SIZE')} (default)`
  return (
    `commit ${git(['rev-parse', '--short', 'HEAD'])}${dirty}, built to dist/ and run with node ` +
    `${SERVICE_NODE_FLAGS.join(' ')} (bin/plantstore.js's flags); ${env.join(' ')} (logs to /dev/null; limits ` +
    `on, never reached); DATABASE_POOL_SIZE=${pool}`
  )
}

/** Which Node ran what, and the other checkouts' services (--service). */
async function softwareLine(runtimes: Runtime[]): Promise<string> {
  const builds = runtimes.filter((runtime) => runtime.checkout !== undefined)
  const [first, ...others] = runtimes.filter((runtime) => runtime.checkout === undefined)
  const labelled = (runtime: Runtime) => `the servers labelled "${runtime.tag.trim()}"`
  const parts = [
    others.length === 0
      ? `Node ${process.version} (the first node on PATH)`
      : `Node ${first?.version} (the first node on PATH: the harness, the reference, the backlog twins and ${first && labelled(first)})`,
    ...others.map((runtime) => `Node ${runtime.version} (${runtime.node}: ${labelled(runtime)})`),
    ...builds.map(
      (runtime) => `${labelled(runtime)}: ${runtime.checkout}'s build, run with node ${runtime.nodeFlags.join(' ')}`,
    ),
    wrkVersion(),
  ]
  // Its processes run wherever the scheduler puts them: on the servers' core they count as "other".
  if (POSTGRES_URL)
    parts.push(`${await postgresVersion(POSTGRES_URL)} (same machine, not pinned, its memory not in peak RSS)`)
  return parts.join(', ')
}

async function measure(options: BenchOptions, pinning: Pinning, cleanup: Cleanup): Promise<number> {
  const started = performance.now()
  const loadBefore = os.loadavg()[0] ?? 0
  const service = serviceLine()
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-'))
  cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
  const serverContext: ServerContext = { cpu: pinning.serverCpu, tmpDir, cleanup }
  const runtimes = await prepareRuntimes(options.nodes, serverContext, log, options.services)
  const { targets, seeding, seededTwins } = await prepareServers(options, serverContext, runtimes)
  await checkPages(targets, options.sizes)
  // Export and import (bench/transfer.ts), unpinned as the seeding is, while the servers wait.
  const plants = TRANSFER_PLANTS[options.quick ? 'quick' : 'full']
  const transfer = await measureTransfer(plants, POSTGRES_URL, serverContext, log)
  // Only now: seeding used both cores while no server was measured.
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
  const { serverCpu, loadCpu } = pinning
  const context: RoundsContext = { options, cursors, serverCpu, loadCpu, blocks: new IdBlocks(), log }
  const measurements: Measurement[] = []
  let twins: Awaited<ReturnType<typeof startTwins>> | undefined
  for (const scenario of options.scenarios) {
    // The twins start only now: the one with the backlog delivers all the while it runs, on the servers' core.
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
  if (writes !== undefined)
    notes.push(`writes checked after the backlog scenarios, each twin stopped first: ${writes.lines.join('; ')}`)
  const topUps = targets.filter((t) => t.seededToDelete > 0).map((t) => `${t.seededToDelete} on ${t.server.label}`)
  if (topUps.length > 0) {
    seeding.push(
      'Plants the delete scenario needed beyond those post and mix created were inserted the same way between ' +
        `runs (ids far above the seeded ones; the service idle): ${topUps.join(', ')}.`,
    )
  }
  const took = duration((performance.now() - started) / 1000)
  notes.push(`the run took ${took}`)

  const report = {
    facts: [
      `Date: ${new Date().toISOString()}`,
      `Command: \`${commandLine(options)}\``,
      `Mode: ${modeLine(options)}`,
      `Machine: ${machineSummary()}`,
      `Software: ${await softwareLine(runtimes)}`,
      `Pinning: ${pinning.note}`,
      `Service: ${service}`,
    ],
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
  // Errors and lost writes make the run fail (exit 1), loudly, after the report is written.
  const errors = errorLines(measurements)
  if (errors.length > 0)
    process.stderr.write(`\nbench: !! ${errors.length} measured runs had errors:\n  ${errors.join('\n  ')}\n`)
  for (const problem of report.problems) process.stderr.write(`\nbench: !! ${problem}\n`)
  return errors.length > 0 || report.problems.length > 0 ? 1 : 0
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
