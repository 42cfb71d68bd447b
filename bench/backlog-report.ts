/**
 * The report's parts for the backlog scenarios: each backend's twins (the same seed, one with another account's
 * webhook backlog), the listed account's req/s with the backlog over without it per round, and the dispatcher's
 * claims during the runs.
 */
import { addCounts, quantileBound } from './claims.js'
import { errorText, int, ms, pct, ratio, rowFor, spread, type Measurement, type ReportContext } from './report-rows.js'
import { BACKLOG_TARGET, backlogText, type Scenario } from './scenarios.js'
import { median } from './stats.js'

/** One backend's twins in one scenario: with the backlog over without, per round. */
interface TwinRatios {
  backend: string
  rps: number[]
  p50: number[]
  p99: number[]
}

function ownRuns(context: ReportContext, scenario: Scenario, server: string): Measurement[] {
  return context.measurements.filter((m) => m.scenario === scenario.name && m.server === server)
}

function twinRatios(context: ReportContext, scenario: Scenario): TwinRatios[] {
  return context.twins.flatMap((pair) => {
    const rounds = ownRuns(context, scenario, pair.with).flatMap((backlog) => {
      const quiet = ownRuns(context, scenario, pair.without).find((m) => m.round === backlog.round)
      return quiet === undefined ? [] : [{ quiet: quiet.wrk, backlog: backlog.wrk }]
    })
    if (rounds.length === 0) return []
    return [
      {
        backend: pair.backend,
        rps: rounds.map(({ quiet, backlog }) => backlog.rps / quiet.rps),
        p50: rounds.map(({ quiet, backlog }) => backlog.p50Ms / quiet.p50Ms),
        p99: rounds.map(({ quiet, backlog }) => backlog.p99Ms / quiet.p99Ms),
      },
    ]
  })
}

const met = (ratios: number[]): boolean => median(ratios) >= BACKLOG_TARGET

function verdict(ratios: number[]): string {
  return met(ratios) ? 'within target' : '**below target**'
}

/** The dispatcher's claims over a server's runs: per run (medians) and in all (the p99 bound). */
interface ClaimSummary {
  perRun: number
  meanMs: number | undefined
  p99Ms: number | undefined
  deliveredPerRun: number
  errors: number
  /** Queued deliveries after the last run. */
  queued: number
}

function claimSummary(runs: Measurement[]): ClaimSummary | undefined {
  const counts = runs.flatMap((m) => (m.dispatcher ? [m.dispatcher] : []))
  const total = addCounts(counts)
  if (total === undefined) return undefined
  const means = counts.filter((c) => c.claims > 0).map((c) => (c.claimSeconds / c.claims) * 1000)
  const p99 = quantileBound(total, 0.99)
  return {
    perRun: median(counts.map((c) => c.claims)),
    meanMs: means.length === 0 ? undefined : median(means),
    // Bucket bounds are decimal seconds: written in ms without binary fractions showing.
    p99Ms: p99 === undefined ? undefined : Number((p99 * 1000).toPrecision(6)),
    deliveredPerRun: median(counts.map((c) => c.delivered)),
    errors: total.claimErrors,
    queued: total.queueDepth,
  }
}

const bound = (msBound: number | undefined): string =>
  msBound === undefined ? 'n/a' : Number.isFinite(msBound) ? `≤ ${msBound}` : '> 5000'

function claimCells(summary: ClaimSummary | undefined): string {
  if (summary === undefined) return 'n/a | n/a | n/a | n/a | n/a'
  const errors = summary.errors > 0 ? ` (**${int(summary.errors)} failed**)` : ''
  return (
    `${int(summary.perRun)}${errors} | ${summary.meanMs === undefined ? 'n/a' : ms(summary.meanMs)} | ` +
    `${bound(summary.p99Ms)} | ${int(summary.deliveredPerRun)} | ${int(summary.queued)}`
  )
}

export function backlogSection(context: ReportContext, scenario: Scenario): string[] {
  const measurements = context.measurements.filter((m) => m.scenario === scenario.name)
  const servers = context.twins.flatMap((pair) => [pair.without, pair.with])
  const rows = servers.flatMap((server) => rowFor(measurements, server, 'list') ?? [])
  const ratios = twinRatios(context, scenario)
  const lines = [
    `### ${scenario.name}: ${scenario.description(context.sizes)}`,
    '',
    '| server | req/s | p50 ms | p99 ms | peak RSS MiB | errors | server core: own / other | wrk core: other | claims per run | claim ms, mean per call | claim p99 ms | delivered per run | queued after |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.server} | ${int(r.rps)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.rssMiB.toFixed(0)} | ${errorText(r)} | ${pct(r.serverCpuPct)} / ${pct(r.otherCpuPct)} | ${pct(r.loadOtherPct)} | ${claimCells(claimSummary(ownRuns(context, scenario, r.server)))} |`,
    ),
    '',
    `| backend | req/s with the backlog / without: median (min–max) | p50 with / without | p99 with / without | target ≥ ${BACKLOG_TARGET} |`,
    '| --- | --- | --- | --- | --- |',
    ...ratios.map(
      (r) => `| ${r.backend} | ${spread(r.rps)} | ${spread(r.p50)} | ${spread(r.p99)} | ${verdict(r.rps)} |`,
    ),
    '',
  ]
  for (const r of ratios) lines.push(`${r.backend} req/s with / without per round: ${r.rps.map(ratio).join(', ')}`, '')
  return lines
}

/** "- **SQLite**: backlog-get 0.97 (0.93–1.01) (within target), …; claims …": a line per backend. */
export function backlogSummary(context: ReportContext): string[] {
  const scenarios = context.scenarios.filter((scenario) => scenario.compare === 'backlog')
  if (scenarios.length === 0) return []
  const lines = context.twins.map((pair) => {
    const parts = scenarios.flatMap((scenario) => {
      const row = twinRatios(context, scenario).find((r) => r.backend === pair.backend)
      return row ? [`${scenario.name} ${spread(row.rps)} (${verdict(row.rps)})`] : []
    })
    const runs = scenarios.flatMap((scenario) => ownRuns(context, scenario, pair.with))
    const claims = claimSummary(runs)
    const claimText =
      claims?.meanMs === undefined
        ? 'no claims measured'
        : `claims during its runs with the backlog ${ms(claims.meanMs)} ms mean per call (median of the runs), ` +
          `p99 ${bound(claims.p99Ms)} ms, ${int(claims.perRun)} per run, ${int(claims.deliveredPerRun)} deliveries per run`
    return `- **${pair.backend}**: ${parts.join(', ')}; ${claimText}`
  })
  return [
    `## Another account's webhook backlog (req/s with it over without; target ≥ ${BACKLOG_TARGET})`,
    '',
    `Twin services per backend, seeded alike but for another account's ${backlogText(context.sizes)}; the claim`,
    'figures are the `claimDeliveries` storage calls of the service with the backlog, from its /metrics',
    '(`plantstore_storage_call_duration_seconds`: `_sum` and `_count` read before and after each measured run; the',
    'p99 is the bucket bound that 99% of the calls stayed within).',
    '',
    ...lines,
    '',
  ]
}

/** The targets table's value for a backend: the median ratio of a backlog scenario. */
export function backlogTarget(name: string) {
  return (context: ReportContext, backend: string): { text: string; met: boolean } | undefined => {
    const scenario = context.scenarios.find((s) => s.name === name)
    const row = scenario && twinRatios(context, scenario).find((r) => r.backend === backend)
    return row && { text: ratio(median(row.rps)), met: met(row.rps) }
  }
}

/** Every twin label of a backend, for the targets that take all of a backend's runs. */
export function twinLabels(context: ReportContext, backend: string): string[] {
  return context.twins.filter((pair) => pair.backend === backend).flatMap((pair) => [pair.without, pair.with])
}
