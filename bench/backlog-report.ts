/**
 * The backlog scenarios' section: each backend's twins (seeded alike, one with another account's webhook backlog),
 * the listed account's req/s with the backlog over without per round, and the dispatcher's claims meanwhile.
 */
import { addCounts, quantileBound } from './claims.js'
import { int, median, ms, pairRatios, ratio, ROW_HEADER, rowCells, rowFor, spread } from './report-rows.js'
import type { Measurement } from './report-rows.js'
import type { ReportContext } from './report-rows.js'
import { BACKLOG_TARGET, backlogText, type Scenario } from './scenarios.js'

function ownRuns(context: ReportContext, scenario: Scenario, server: string): Measurement[] {
  return context.measurements.filter((m) => m.scenario === scenario.name && m.server === server)
}

/** Per backend: with the backlog over without, per round. */
function twinRatios(context: ReportContext, scenario: Scenario) {
  return context.twins.flatMap((pair) => {
    const ratios = pairRatios(ownRuns(context, scenario, pair.with), ownRuns(context, scenario, pair.without))
    return ratios.rps.length === 0 ? [] : [{ backend: pair.backend, ...ratios }]
  })
}

const met = (ratios: number[]): boolean => median(ratios) >= BACKLOG_TARGET

/** The claims cells of a server's runs: per run (medians) and in all (the p99 bound). */
function claimCells(runs: Measurement[]): string {
  const counts = runs.flatMap((m) => (m.dispatcher ? [m.dispatcher] : []))
  const total = addCounts(counts)
  if (total === undefined) return 'n/a | n/a | n/a | n/a | n/a'
  const means = counts.filter((c) => c.claims > 0).map((c) => (c.claimSeconds / c.claims) * 1000)
  // Bucket bounds are decimal seconds: written in ms without binary fractions showing.
  const p99 = quantileBound(total, 0.99)
  const bound = p99 === undefined ? 'n/a' : Number.isFinite(p99) ? `≤ ${Number((p99 * 1000).toPrecision(6))}` : '> 5000'
  const errors = total.claimErrors > 0 ? ` (**${int(total.claimErrors)} failed**)` : ''
  return (
    `${int(median(counts.map((c) => c.claims)))}${errors} | ${means.length === 0 ? 'n/a' : ms(median(means))} | ` +
    `${bound} | ${int(median(counts.map((c) => c.delivered)))} | ${int(total.queueDepth)}`
  )
}

export function backlogSection(context: ReportContext, scenario: Scenario): string[] {
  const measurements = context.measurements.filter((m) => m.scenario === scenario.name)
  const servers = context.twins.flatMap((pair) => [pair.without, pair.with])
  const rows = servers.flatMap((server) => rowFor(measurements, server, 'list') ?? [])
  const ratios = twinRatios(context, scenario)
  return [
    `### ${scenario.name}: ${scenario.description(context.sizes)}`,
    '',
    `Twin services per backend, seeded alike but for another account's ${backlogText(context.sizes)}. Claims are`,
    "the `claimDeliveries` storage calls in the service's /metrics (`plantstore_storage_call_duration_seconds`, read",
    'before and after each measured run; the p99 is the bucket bound 99% of the calls stayed within).',
    '',
    `| server | ${ROW_HEADER} | claims per run | claim ms, mean per call | claim p99 ms | delivered per run | queued after |`,
    `| --- ${'| ---: '.repeat(12)}|`,
    ...rows.map((r) => `| ${r.server} | ${rowCells(r)} | ${claimCells(ownRuns(context, scenario, r.server))} |`),
    '',
    `| backend | req/s with the backlog / without: median (min–max) | p50 with / without | p99 with / without | target ≥ ${BACKLOG_TARGET} |`,
    '| --- | --- | --- | --- | --- |',
    ...ratios.map(
      (r) =>
        `| ${r.backend} | ${spread(r.rps)} | ${spread(r.p50)} | ${spread(r.p99)} | ${met(r.rps) ? 'within target' : '**below target**'} |`,
    ),
    '',
    ...ratios.flatMap((r) => [`${r.backend} req/s with / without per round: ${r.rps.map(ratio).join(', ')}`, '']),
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
