import { countsBetween, scrapeDispatcher, type DispatcherCounts } from './claims.js'
import { BLOCK_SIZE, IdPool, formatRanges, type IdBlocks, type IdRange } from './id-pool.js'
import type { BenchOptions } from './options.js'
import type { CoreReport, Measurement } from './report.js'
import { CoreUsage } from './core-usage.js'
import { PeakRss } from './rss.js'
import { catalogueEnv } from './plants.js'
import { ACCOUNT_NAMES, count, LIST_PATH, type AccountKey, type Scenario } from './scenarios.js'
import { insertPlants } from './bulk-seed.js'
import type { Server } from './servers.js'
import { runWrk, type WrkResult } from './wrk.js'

/** A server under test and what the harness knows about its data. */
export interface Target {
  server: Server
  /** Each account's token on this server; the reference knows the listed account only. */
  tokens: Partial<Record<AccountKey, string>>
  /** The service's database, for the delete scenario's top-ups; undefined for the reference. */
  databaseUrl: string | undefined
  /** Ids that exist and may be deleted; undefined for the reference, which stores nothing. */
  pool: IdPool | undefined
  /** Highest req/s seen per scenario (warm-ups included), to size the next delete run. */
  rates: Map<string, number>
  /** Plants inserted only for the delete scenario (beyond those the post and mix runs left), for the report. */
  seededToDelete: number
  /** Backlog scenarios' twins only: the backend, and whether this twin holds the noisy account's backlog. */
  twin?: { backend: string; backlog: boolean }
}

/** A server under test with no runs yet; a pool of ids to delete when it stores plants (not the reference). */
export function newTarget(server: Server, tokens: Target['tokens'], databaseUrl?: string): Target {
  const pool = databaseUrl === undefined ? undefined : new IdPool()
  return { server, tokens, databaseUrl, pool, rates: new Map(), seededToDelete: 0 }
}

export interface RoundsContext {
  options: BenchOptions
  /** Cursors of the deep pages of each account, comma-separated (the same ids on every service). */
  cursors: Partial<Record<AccountKey, string>>
  serverCpu: number | undefined
  loadCpu: number | undefined
  blocks: IdBlocks
  log: (line: string) => void
}

/** Rate assumed (req/s) when no post or delete run on the target has shown one yet. */
const FLOOR_RATE = 5000

/**
 * Ids a delete run can use: the target's whole pool, first topped up to 3 times what the fastest post or delete
 * rate seen on this target would use. Generous on purpose: rates on a noisy machine swing several-fold between runs,
 * running out shows as 404s, and ids a run does not reach stay for the next one. Top-ups go straight into the
 * database (bench/bulk-seed.ts) while the service is idle between runs: a fraction of a second, where seeding them
 * through the API would take as long as deleting them.
 */
async function existingIds(target: Target, seconds: number, context: RoundsContext): Promise<IdRange[][]> {
  const { threads, connections } = context.options
  const pool = target.pool
  if (pool === undefined || target.databaseUrl === undefined) {
    // The reference deletes nothing, so any ids do.
    const scratch = new IdPool()
    const start = context.blocks.take()
    scratch.add({ start, end: start + BLOCK_SIZE })
    return scratch.take(BLOCK_SIZE, threads)
  }
  const rate = Math.max(...['delete', 'post'].map((name) => target.rates.get(name) ?? 0), FLOOR_RATE)
  const needed = Math.ceil(rate * seconds * 3) + connections
  if (pool.size < needed) {
    const start = context.blocks.take()
    const range = { start, end: start + needed - pool.size }
    await insertPlants(target.databaseUrl, ACCOUNT_NAMES.list, range)
    target.seededToDelete += range.end - range.start
    context.log(`  inserted ${range.end - range.start} plants to delete on ${target.server.label}`)
    pool.add(range)
  }
  return pool.take(pool.size, threads)
}

/** Adds the ids a fresh-id run certainly created: not each thread's first (wrk's dry-run call) nor last ones. */
function recordCreated(pool: IdPool, result: WrkResult, context: RoundsContext): void {
  const inFlight = Math.ceil(context.options.connections / context.options.threads)
  for (const thread of result.threads) pool.add({ start: thread.first + 1, end: thread.next - inFlight })
}

function tokenOf(target: Target, account: AccountKey): string {
  const token = target.tokens[account]
  if (token === undefined) throw new Error(`${target.server.label} has no ${account} account`)
  return token
}

/** One wrk run of a scenario against a target's account; the peak RSS is measured over the run. */
async function runOnce(
  scenario: Scenario,
  target: Target,
  account: AccountKey,
  seconds: number,
  context: RoundsContext,
) {
  const { options } = context
  const env: Record<string, string> = {
    PLANTSTORE_BENCH_TOKEN: tokenOf(target, account),
    PLANTSTORE_BENCH_LIST_PATH: LIST_PATH,
    PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(),
    ...scenario.env,
  }
  if (scenario.pages === 'deep') {
    const cursors = context.cursors[account]
    if (cursors === undefined) throw new Error(`no cursors for the ${account} account`)
    env.PLANTSTORE_BENCH_CURSORS = cursors
  }
  if (scenario.ids === 'fresh') {
    env.PLANTSTORE_BENCH_ID_START = String(context.blocks.take())
    env.PLANTSTORE_BENCH_ID_STRIDE = String(Math.floor(BLOCK_SIZE / options.threads))
  }
  const deleting = scenario.ids === 'existing' ? await existingIds(target, seconds, context) : undefined
  if (deleting) env.PLANTSTORE_BENCH_DELETE_RANGES = formatRanges(deleting)

  const rss = new PeakRss(target.server.pid)
  const pinned = context.serverCpu !== undefined && context.loadCpu !== undefined
  const serverCore = pinned ? new CoreUsage(context.serverCpu as number) : undefined
  const loadCore = pinned ? new CoreUsage(context.loadCpu as number) : undefined
  serverCore?.watch(target.server.pid)
  rss.start()
  serverCore?.start()
  loadCore?.start()
  const wrk = await runWrk(
    {
      url: target.server.url,
      lua: scenario.lua,
      seconds,
      connections: options.connections,
      threads: options.threads,
      cpu: context.loadCpu,
      env,
    },
    (pid) => loadCore?.watch(pid, true),
  )
  const rssBytes = rss.stop()
  const core: CoreReport | undefined = serverCore && loadCore && { server: serverCore.stop(), load: loadCore.stop() }

  target.rates.set(scenario.name, Math.max(target.rates.get(scenario.name) ?? 0, wrk.rps))
  if (target.pool && scenario.ids === 'fresh') recordCreated(target.pool, wrk, context)
  if (target.pool && deleting)
    target.pool.giveBack(
      deleting,
      wrk.threads.map((t) => t.taken),
    )
  return { wrk, rssBytes, core }
}

function progressLine(
  scenario: Scenario,
  round: number,
  rounds: number,
  label: string,
  wrk: WrkResult,
  core: CoreReport | undefined,
): string {
  const errors = wrk.non2xx + wrk.socketErrors
  const warning = errors > 0 ? `  !! ${wrk.non2xx} non-2xx, ${wrk.socketErrors} socket errors` : ''
  const percent = (share: number): string => `${(share * 100).toFixed(0)}%`
  const other =
    core === undefined
      ? ''
      : `  server core: own ${percent(core.server.own)} other ${percent(core.server.other)};` +
        ` wrk core: other ${percent(core.load.other)}`
  return (
    `  ${scenario.name} ${round}/${rounds} ${label.padEnd(27)} ${Math.round(wrk.rps).toString().padStart(7)} req/s` +
    `  p50 ${wrk.p50Ms.toFixed(2)} ms  p99 ${wrk.p99Ms.toFixed(2)} ms${other}${warning}`
  )
}

/** "; claims 412, 0.21 ms each; 398 delivered; 499,600 queued": the progress line's dispatcher part. */
function claimsText(counts: DispatcherCounts): string {
  const mean = counts.claims > 0 ? `, ${((counts.claimSeconds / counts.claims) * 1000).toFixed(2)} ms each` : ''
  return (
    `; claims ${counts.claims}${mean}; ${counts.delivered} delivered; ` +
    `${counts.queueDepth.toLocaleString('en-US')} queued`
  )
}

/** The runs of one round: [target, account] in order. */
function roundPlan(scenario: Scenario, targets: Target[], round: number): Array<[Target, AccountKey]> {
  if (scenario.compare === 'reference') return targets.map((target) => [target, 'list'])
  if (scenario.compare === 'backlog') {
    // Each backend's twins back to back, the order flipping every round as in the size scenarios.
    const order = round % 2 === 1 ? [false, true] : [true, false]
    return targets
      .filter((target) => target.twin?.backlog === false)
      .flatMap((quiet) =>
        order.flatMap((backlog) =>
          targets
            .filter((t) => t.twin?.backend === quiet.twin?.backend && t.twin?.backlog === backlog)
            .map((t): [Target, AccountKey] => [t, 'list']),
        ),
      )
  }
  // Size: the services only (those holding both accounts), each on both accounts back to back; the order flips
  // every round, so neither account always runs first (after the other account's load, or right after another
  // server's).
  const accounts: AccountKey[] = round % 2 === 1 ? ['small', 'large'] : ['large', 'small']
  return targets
    .filter((target) => target.tokens.small !== undefined && target.tokens.large !== undefined)
    .flatMap((target) => accounts.map((account): [Target, AccountKey] => [target, account]))
}

/** Measured seconds of one run of the scenario. */
export function runSeconds(scenario: Scenario, options: BenchOptions): number {
  return scenario.compare === 'size' ? options.sizeDuration : options.duration
}

/**
 * Interleaved rounds: in each, every target (and, in size scenarios, each of its two accounts) in turn gets a
 * warm-up then a measured run, so slow drift of a noisy machine hits all alike and each round's ratio compares runs
 * made moments apart. In backlog scenarios the service's metrics are read just before and after each measured run,
 * for the webhook dispatcher's work during it.
 */
export async function runScenario(scenario: Scenario, targets: Target[], context: RoundsContext) {
  const { rounds, warmup, sizes } = context.options
  const seconds = runSeconds(scenario, context.options)
  const measurements: Measurement[] = []
  context.log(`${scenario.name}: ${scenario.description(sizes)}`)
  for (let round = 1; round <= rounds; round++) {
    for (const [target, account] of roundPlan(scenario, targets, round)) {
      if (warmup > 0) await runOnce(scenario, target, account, warmup, context)
      const watch = scenario.compare === 'backlog'
      const before = watch ? await scrapeDispatcher(target.server.url) : undefined
      const { wrk, rssBytes, core } = await runOnce(scenario, target, account, seconds, context)
      const dispatcher = before && countsBetween(before, await scrapeDispatcher(target.server.url))
      const label =
        scenario.compare === 'size' ? `${target.server.label} ${count(sizes[account])}` : target.server.label
      context.log(progressLine(scenario, round, rounds, label, wrk, core) + (dispatcher ? claimsText(dispatcher) : ''))
      measurements.push({
        scenario: scenario.name,
        round,
        server: target.server.label,
        account,
        wrk,
        rssBytes,
        core,
        dispatcher,
      })
    }
  }
  return measurements
}
