import { BLOCK_SIZE, IdPool, formatRanges, type IdBlocks, type IdRange } from './id-pool.js'
import type { BenchOptions } from './options.js'
import type { CoreReport, Measurement } from './report.js'
import { CoreUsage } from './core-usage.js'
import { catalogueEnv } from './plants.js'
import { PeakRss } from './rss.js'
import { LIST_PATH, type Scenario } from './scenarios.js'
import { seedRange } from './seed.js'
import type { Server } from './servers.js'
import { runWrk, type WrkResult } from './wrk.js'

/** A server under test and what the harness knows about its data. */
export interface Target {
  server: Server
  /** Ids that exist and may be deleted; undefined for the reference, which stores nothing. */
  pool: IdPool | undefined
  /** Highest req/s seen per scenario (warm-ups included), to size the next delete run. */
  rates: Map<string, number>
  /** Plants seeded only for the delete scenario (beyond those the post and mix runs left), for the report. */
  seededToDelete: number
}

export interface RoundsContext {
  options: BenchOptions
  token: string
  serverCpu: number | undefined
  loadCpu: number | undefined
  blocks: IdBlocks
  log: (line: string) => void
}

/**
 * Ids a delete run can use: the target's whole pool, first topped up by seeding to 1.5 times what the fastest rate
 * seen on this target (delete, post or seeding) would use. Generous on purpose: rates on a noisy machine swing
 * several-fold between runs, running out shows as 404s, and ids a run does not reach stay for the next one, so
 * over-seeding costs only what is left at the very end.
 */
async function existingIds(target: Target, seconds: number, context: RoundsContext): Promise<IdRange[][]> {
  const { threads, connections } = context.options
  const pool = target.pool
  if (pool === undefined) {
    // The reference deletes nothing, so any ids do.
    const scratch = new IdPool()
    const start = context.blocks.take()
    scratch.add({ start, end: start + BLOCK_SIZE })
    return scratch.take(BLOCK_SIZE, threads)
  }
  const rate = Math.max(...['delete', 'post', 'seed'].map((name) => target.rates.get(name) ?? 0), 1000)
  const needed = Math.ceil(rate * seconds * 1.5) + connections
  if (pool.size < needed) {
    const start = context.blocks.take()
    const range = { start, end: start + needed - pool.size }
    const seeded = await seedRange(target.server.url, context.token, range)
    target.seededToDelete += range.end - range.start
    context.log(
      `  seeded ${range.end - range.start} plants to delete on ${target.server.label} at ${Math.round(seeded)}/s`,
    )
    pool.add(range)
  }
  return pool.take(pool.size, threads)
}

/** Adds the ids a fresh-id run certainly created: not each thread's first (wrk's dry-run call) nor last ones. */
function recordCreated(pool: IdPool, result: WrkResult, context: RoundsContext): void {
  const inFlight = Math.ceil(context.options.connections / context.options.threads)
  for (const thread of result.threads) pool.add({ start: thread.first + 1, end: thread.next - inFlight })
}

/** One wrk run of a scenario against a target; the peak RSS is measured over the run. */
async function runOnce(scenario: Scenario, target: Target, seconds: number, context: RoundsContext) {
  const { options } = context
  const env: Record<string, string> = {
    PLANTSTORE_BENCH_TOKEN: context.token,
    PLANTSTORE_BENCH_LIST_PATH: LIST_PATH,
    PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(),
    ...scenario.env,
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
  server: string,
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
    `  ${scenario.name} ${round}/${rounds} ${server.padEnd(10)} ${Math.round(wrk.rps).toString().padStart(7)} req/s` +
    `  p50 ${wrk.p50Ms.toFixed(2)} ms  p99 ${wrk.p99Ms.toFixed(2)} ms${other}${warning}`
  )
}

/**
 * Interleaved rounds: in each, every target in turn gets a warm-up then a measured run, so slow drift of a noisy
 * machine hits all servers alike and each round's ratio compares runs made moments apart.
 */
export async function runScenario(scenario: Scenario, targets: Target[], context: RoundsContext) {
  const { rounds, warmup, duration } = context.options
  const measurements: Measurement[] = []
  context.log(`${scenario.name}: ${scenario.description}`)
  for (let round = 1; round <= rounds; round++) {
    for (const target of targets) {
      await runOnce(scenario, target, warmup, context)
      const { wrk, rssBytes, core } = await runOnce(scenario, target, duration, context)
      context.log(progressLine(scenario, round, rounds, target.server.label, wrk, core))
      measurements.push({ scenario: scenario.name, round, server: target.server.label, wrk, rssBytes, core })
    }
  }
  return measurements
}
