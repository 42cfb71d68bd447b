import { insertPlants } from './bulk-seed.js'
import { peakRss, resetPeakRss, watchCores, type Pinning } from './machine.js'
import { countsBetween, scrapeDispatcher } from './http.js'
import type { BenchOptions } from './options.js'
import { CATALOGUE_ENV } from './plants.js'
import type { Measurement } from './report-rows.js'
import { ACCOUNT_NAMES, count, type AccountKey, type Scenario } from './scenarios.js'
import type { Server } from './servers.js'
import { runWrk } from './wrk.js'

/** A server under test and what the harness knows about its data. */
export interface Target {
  server: Server
  /** Each account's token on this server; the reference knows the listed account only. */
  tokens: Partial<Record<AccountKey, string>>
  /** The database, for the delete scenario's plants; none for the reference. */
  databaseUrl: string | undefined
  /** Highest post or delete req/s seen (warm-ups included), to size the next delete run; plants inserted for it. */
  writeRps: number
  seededToDelete: number
  /** What runs around each of its runs (backups during them). */
  around?: <T>(run: () => Promise<T>) => Promise<T>
  /** What wrk-script.lua is told beside the scenario (a header to send). */
  env?: Record<string, string>
}

export const newTarget = (server: Server, tokens: Target['tokens'], databaseUrl?: string): Target => ({
  ...{ server, tokens, databaseUrl, writeRps: 0, seededToDelete: 0 },
})

/** The targets a pair scenario compares (backlog twins, a service with and without backups or a header), by label. */
export type Pair = { name: string; without: string; with: string }

/**
 * Fresh ids come in blocks no run shares: far above the seeded ids (1..n) and well inside 2^53, so they stay exact
 * in JavaScript and in wrk's Lua. A block is much larger than any run can use.
 */
const BLOCK_SIZE = 1_000_000_000
let nextBlock = 1_000_000_000_000
const takeBlock = (): number => (nextBlock += BLOCK_SIZE) - BLOCK_SIZE

export interface RoundsContext {
  options: BenchOptions
  /** Cursors of the deep pages of each account, comma-separated (the same ids on every service). */
  cursors: Partial<Record<AccountKey, string>>
  pinning: Pinning
  log: (line: string) => void
}

/**
 * Ids a delete run deletes: a block of plants inserted with SQL while the server is idle, 3 times what the fastest
 * write rate seen on this target (at least 5,000 req/s) would use. Generous on purpose: rates on a noisy machine
 * swing several-fold between runs, and running out shows as 404s. The reference deletes nothing, so any ids do.
 */
async function existingIds(target: Target, seconds: number, context: RoundsContext) {
  const start = takeBlock()
  const needed = Math.ceil(Math.max(target.writeRps, 5000) * seconds * 3) + context.options.connections
  if (target.databaseUrl === undefined) return { start, end: start + needed }
  await insertPlants(target.databaseUrl, ACCOUNT_NAMES.list, { start, end: start + needed })
  target.seededToDelete += needed
  return { start, end: start + needed }
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
    PLANTSTORE_BENCH_REQUESTS: scenario.requests,
    PLANTSTORE_BENCH_TOKEN: token,
    PLANTSTORE_BENCH_CATALOGUE: CATALOGUE_ENV,
    PLANTSTORE_BENCH_CURSORS: context.cursors[account] ?? '',
    ...target.env,
  }
  // POSTs take fresh ids from a block of their own; DELETEs, plants inserted for the run.
  if (scenario.requests === 'post' || scenario.requests === 'mix') env.PLANTSTORE_BENCH_ID_START = String(takeBlock())
  if (scenario.requests === 'delete') {
    const { start, end } = await existingIds(target, seconds, context)
    Object.assign(env, { PLANTSTORE_BENCH_ID_START: String(start), PLANTSTORE_BENCH_ID_END: String(end) })
  }
  resetPeakRss(target.server.pid)
  const cores = watchCores(context.pinning, target.server.pid)
  const request = { url: target.server.url, seconds, connections: context.options.connections, env }
  const run = () => runWrk({ ...request, cpu: context.pinning.loadCpu })
  const wrk = await (target.around ? target.around(run) : run())
  const rssBytes = peakRss(target.server.pid)
  const core = cores?.()
  if (['post', 'delete'].includes(scenario.requests)) target.writeRps = Math.max(target.writeRps, wrk.rps)
  return { wrk, rssBytes, core }
}

/**
 * The runs of one round, [target, account] in order: every target in the reference scenarios; in the pair ones
 * (targets given as without, with, without, with…) each pair back to back, and in the size ones each service
 * (those holding both accounts) on both accounts back to back, the order flipping every round, so neither always
 * runs first.
 */
function roundPlan(scenario: Scenario, targets: Target[], round: number): Array<[Target, AccountKey]> {
  const flip = <T>(pair: T[]): T[] => (round % 2 === 1 ? pair : [...pair].reverse())
  if (scenario.compare === 'reference') return targets.map((target) => [target, 'list'])
  if (scenario.compare !== 'size') {
    const pairs = targets.filter((_, i) => i % 2 === 0).map((without, i) => [without, targets[2 * i + 1] as Target])
    return pairs.flatMap((pair) => flip(pair).map((target): [Target, AccountKey] => [target, 'list']))
  }
  return targets
    .filter((target) => target.tokens.small !== undefined && target.tokens.large !== undefined)
    .flatMap((target) => flip<AccountKey>(['small', 'large']).map((account): [Target, AccountKey] => [target, account]))
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
      const run = await runOnce(scenario, target, account, seconds, context)
      const dispatcher = before && countsBetween(before, await scrapeDispatcher(target.server.url))
      const server = target.server.label
      measurements.push({ scenario: scenario.name, round, server, account, ...run, dispatcher })
      const { rps, p50Ms, p99Ms, non2xx, socketErrors } = run.wrk
      const label = scenario.compare === 'size' ? `${server} ${count(sizes[account])}` : server
      context.log(
        `  ${scenario.name} ${round} ${label.padEnd(27)} ${Math.round(rps).toString().padStart(7)} req/s  p50 ` +
          `${p50Ms.toFixed(2)} ms  p99 ${p99Ms.toFixed(2)} ms${non2xx + socketErrors > 0 ? '  !! errors' : ''}`,
      )
    }
  }
  return measurements
}
