import { countsBetween, scrapeDispatcher, type DispatcherCounts } from './claims.js'
import { insertPlants } from './bulk-seed.js'
import { CoreUsage } from './core-usage.js'
import { BLOCK_SIZE, IdPool, formatRanges, type IdBlocks, type IdRange } from './id-pool.js'
import type { BenchOptions } from './options.js'
import { catalogueEnv } from './plants.js'
import type { CoreReport, Measurement } from './report-rows.js'
import { PeakRss } from './rss.js'
import { ACCOUNT_NAMES, count, LIST_PATH, type AccountKey, type Scenario } from './scenarios.js'
import type { Server } from './servers.js'
import { runWrk, type WrkResult } from './wrk.js'

/** A server under test and what the harness knows about its data. */
export interface Target {
  server: Server
  /** Each account's token on this server; the reference knows the listed account only. */
  tokens: Partial<Record<AccountKey, string>>
  /** The database, for the delete scenario's top-ups, and the ids that may be deleted; none for the reference. */
  databaseUrl: string | undefined
  pool: IdPool | undefined
  /** Highest req/s seen per scenario (warm-ups included), to size the next delete run. */
  rates: Map<string, number>
  /** Plants inserted for the delete scenario (beyond those post and mix left), for the report. */
  seededToDelete: number
  /** Backlog twins only: the backend, and whether this twin holds the noisy account's backlog. */
  twin?: { backend: string; backlog: boolean }
}

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

/**
 * Ids a delete run can use: the whole pool, first topped up to 3 times what the fastest post or delete rate seen
 * on this target (at least 5,000 req/s) would use. Generous on purpose: rates on a noisy machine swing several-fold
 * between runs and running out shows as 404s. Top-ups go straight into the database while the service is idle.
 */
async function existingIds(target: Target, seconds: number, context: RoundsContext): Promise<IdRange[]> {
  const { pool, databaseUrl } = target
  if (pool === undefined || databaseUrl === undefined) {
    // The reference deletes nothing, so any ids do.
    const start = context.blocks.take()
    return [{ start, end: start + BLOCK_SIZE }]
  }
  const rate = Math.max(...['delete', 'post'].map((name) => target.rates.get(name) ?? 0), 5000)
  const needed = Math.ceil(rate * seconds * 3) + context.options.connections
  if (pool.size < needed) {
    const start = context.blocks.take()
    const range = { start, end: start + needed - pool.size }
    await insertPlants(databaseUrl, ACCOUNT_NAMES.list, range)
    target.seededToDelete += range.end - range.start
    context.log(`  inserted ${range.end - range.start} plants to delete on ${target.server.label}`)
    pool.add(range)
  }
  return pool.takeAll()
}

/** One wrk run of a scenario against a target's account, with the server's peak RSS and the cores' use. */
async function runOnce(
  scenario: Scenario,
  target: Target,
  account: AccountKey,
  seconds: number,
  context: RoundsContext,
) {
  const token = target.tokens[account]
  if (token === undefined) throw new Error(`${target.server.label} has no ${account} account`)
  const env: Record<string, string> = {
    PLANTSTORE_BENCH_TOKEN: token,
    PLANTSTORE_BENCH_LIST_PATH: LIST_PATH,
    PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(),
    ...scenario.env,
  }
  if (scenario.pages === 'deep') env.PLANTSTORE_BENCH_CURSORS = context.cursors[account] ?? ''
  if (scenario.ids === 'fresh') env.PLANTSTORE_BENCH_ID_START = String(context.blocks.take())
  const deleting = scenario.ids === 'existing' ? await existingIds(target, seconds, context) : undefined
  if (deleting) env.PLANTSTORE_BENCH_DELETE_RANGES = formatRanges(deleting)

  const rss = new PeakRss(target.server.pid)
  const { serverCpu, loadCpu, options } = context
  const cores = serverCpu !== undefined && loadCpu !== undefined
  const serverCore = cores ? new CoreUsage(serverCpu) : undefined
  const loadCore = cores ? new CoreUsage(loadCpu) : undefined
  serverCore?.watch(target.server.pid)
  rss.start()
  serverCore?.start()
  loadCore?.start()
  const request = { url: target.server.url, lua: scenario.lua, seconds, connections: options.connections, env }
  const wrk = await runWrk({ ...request, cpu: loadCpu }, (pid) => loadCore?.watch(pid, true))
  const rssBytes = rss.stop()
  const core: CoreReport | undefined = serverCore && loadCore && { server: serverCore.stop(), load: loadCore.stop() }

  target.rates.set(scenario.name, Math.max(target.rates.get(scenario.name) ?? 0, wrk.rps))
  const [thread] = wrk.threads
  // Created for certain: not the first id (wrk's dry-run call) nor the last `connections` (maybe in flight).
  if (target.pool && scenario.ids === 'fresh' && thread) {
    target.pool.add({ start: thread.first + 1, end: thread.next - options.connections })
  }
  if (target.pool && deleting) target.pool.giveBack(deleting, thread?.taken ?? Infinity)
  return { wrk, rssBytes, core }
}

function progressLine(name: string, round: number, label: string, wrk: WrkResult, core: CoreReport | undefined) {
  const percent = (share: number): string => `${(share * 100).toFixed(0)}%`
  const errors = wrk.non2xx + wrk.socketErrors
  return (
    `  ${name} ${round} ${label.padEnd(27)} ${Math.round(wrk.rps).toString().padStart(7)} req/s` +
    `  p50 ${wrk.p50Ms.toFixed(2)} ms  p99 ${wrk.p99Ms.toFixed(2)} ms` +
    (core === undefined
      ? ''
      : `  server core: own ${percent(core.server.own)} other ${percent(core.server.other)};` +
        ` wrk core: other ${percent(core.load.other)}`) +
    (errors > 0 ? `  !! ${wrk.non2xx} non-2xx, ${wrk.socketErrors} socket errors` : '')
  )
}

/** "; claims 412, 0.21 ms each; 398 delivered; 499,600 queued": the progress line's dispatcher part. */
function claimsText(counts: DispatcherCounts): string {
  const mean = counts.claims > 0 ? `, ${((counts.claimSeconds / counts.claims) * 1000).toFixed(2)} ms each` : ''
  return `; claims ${counts.claims}${mean}; ${counts.delivered} delivered; ${counts.queueDepth.toLocaleString('en-US')} queued`
}

/**
 * The runs of one round, [target, account] in order: every target in the reference scenarios; in the backlog ones
 * each backend's twins back to back, and in the size ones each service (those holding both accounts) on both
 * accounts back to back, the order flipping every round, so neither always runs first.
 */
function roundPlan(scenario: Scenario, targets: Target[], round: number): Array<[Target, AccountKey]> {
  if (scenario.compare === 'reference') return targets.map((target) => [target, 'list'])
  if (scenario.compare === 'backlog') {
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
  const accounts: AccountKey[] = round % 2 === 1 ? ['small', 'large'] : ['large', 'small']
  return targets
    .filter((target) => target.tokens.small !== undefined && target.tokens.large !== undefined)
    .flatMap((target) => accounts.map((account): [Target, AccountKey] => [target, account]))
}

/**
 * Interleaved rounds: in each, every target (and account) in turn gets a warm-up then a measured run, so a noisy
 * machine's drift hits all alike and each round's ratios compare runs made moments apart. In the backlog scenarios
 * the service's metrics are read just before and after each measured run, for the dispatcher's work during it.
 */
export async function runScenario(scenario: Scenario, targets: Target[], context: RoundsContext) {
  const { rounds, warmup, sizes, duration, sizeDuration } = context.options
  const seconds = scenario.compare === 'size' ? sizeDuration : duration
  const measurements: Measurement[] = []
  context.log(`${scenario.name}: ${scenario.description(sizes)}`)
  for (let round = 1; round <= rounds; round++) {
    for (const [target, account] of roundPlan(scenario, targets, round)) {
      if (warmup > 0) await runOnce(scenario, target, account, warmup, context)
      const watch = scenario.compare === 'backlog'
      const before = watch ? await scrapeDispatcher(target.server.url) : undefined
      const { wrk, rssBytes, core } = await runOnce(scenario, target, account, seconds, context)
      const dispatcher = before && countsBetween(before, await scrapeDispatcher(target.server.url))
      const server = target.server.label
      const label = scenario.compare === 'size' ? `${server} ${count(sizes[account])}` : server
      context.log(progressLine(scenario.name, round, label, wrk, core) + (dispatcher ? claimsText(dispatcher) : ''))
      measurements.push({ scenario: scenario.name, round, server, account, wrk, rssBytes, core, dispatcher })
    }
  }
  return measurements
}
