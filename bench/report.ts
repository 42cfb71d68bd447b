/** The report, in Markdown: the run's facts, a section per scenario, the backup load's, the seeding, errors, notes. */
import { int, median, ms, pairRatios, REFERENCE, ROW_HEADER, rowCells, rowFor, spread } from './report-rows.js'
import type { Measurement, Row } from './report-rows.js'
import type { Pair } from './rounds.js'
import { backlogText, count, SIZE_TARGET, type AccountKey, type BenchSizes, type Scenario } from './scenarios.js'

/** Above this share of a core, other processes make a run's figures doubtful. */
const BUSY_SHARE = 0.1

interface ReportContext {
  /** The run's facts, "Key: value" each (date, command, machine, software…). */
  facts: string[]
  sizes: BenchSizes
  scenarios: Scenario[]
  /** Server labels in run order, reference first; each service's label → its plain handler's. */
  servers: string[]
  plain: Record<string, string>
  /** The pair scenarios' pairs: the backlog twins, the service with and without backups. */
  pairs: Pair[]
  measurements: Measurement[]
  /** Notes (how the data was seeded and checked…), failed checks (writes acknowledged but lost): a line each. */
  notes: string[]
  problems: string[]
}

/** "SQLite" for the listed account, "SQLite (large account)" for the others: a run's or a row's label. */
const runLabel = (r: { server: string; account: AccountKey }) =>
  r.account === 'list' ? r.server : `${r.server} (${r.account} account)`

/** A row per server (and account), with any `extra` columns. */
function statsTable(rows: Row[], extra = { header: '', cells: (_row: Row) => '' }) {
  const columns = ROW_HEADER.split('|').length + extra.header.split('|').length - 1
  return [
    `| server | ${ROW_HEADER} |${extra.header}`,
    `| --- ${'| ---: '.repeat(columns)}|`,
    ...rows.map((r) => `| ${runLabel(r)} | ${rowCells(r)} |${extra.cells(r)}`),
    '',
  ]
}

/** Per pair [name, over, under], per round: the req/s ratio (`pick`ed: page time is its inverse), p50 and p99's. */
function ratioTable(
  header: string,
  target: [string, (median: number) => boolean] | undefined,
  pairs: Array<[string, Measurement[], Measurement[]]>,
  pick = (r: number) => r,
) {
  const ratios = pairs.flatMap(([name, over, under]) => {
    const { rps, p50, p99 } = pairRatios(over, under)
    return rps.length === 0 ? [] : [{ name, values: rps.map(pick), p50, p99 }]
  })
  return [
    `| | ${header}: median (min–max) | p50 ratio | p99 ratio | target ${target?.[0] ?? '(none)'} |`,
    '| --- | --- | --- | --- | --- |',
    ...ratios.map(
      (r) =>
        `| ${r.name} | ${spread(r.values)} | ${spread(r.p50)} | ${spread(r.p99)} | ${!target ? '–' : target[1](median(r.values)) ? 'met' : '**missed**'} |`,
    ),
    '',
  ]
}

function scenarioSection(c: ReportContext, scenario: Scenario): string[] {
  const measurements = c.measurements.filter((m) => m.scenario === scenario.name)
  const runs = (server: string, account?: AccountKey) =>
    measurements.filter((m) => m.server === server && (account === undefined || m.account === account))
  if (scenario.compare === 'reference') {
    const rows = c.servers.flatMap((server) => rowFor(measurements, server, 'list', c.plain[server]) ?? [])
    const cells = (r: Row) =>
      ` ${r.server === REFERENCE ? '1.00 (itself)' : spread(r.ratios) || 'n/a'} | ${spread(r.vsPlain) || '–'} |`
    return statsTable(rows, { header: ' req/s vs reference: median (min–max) | vs plain handler |', cells })
  }
  if (scenario.compare === 'size') {
    const accounts = ['small', 'large'] as const
    const [small, large] = accounts.map((account) => count(c.sizes[account]))
    return [
      ...statsTable(c.servers.flatMap((server) => accounts.flatMap((a) => rowFor(measurements, server, a) ?? []))),
      ...ratioTable(
        `page time at ${large} / at ${small}`,
        [`≤ ${SIZE_TARGET}`, (r) => r <= SIZE_TARGET],
        c.servers.map((server) => [server, runs(server, 'large'), runs(server, 'small')]),
        (r) => 1 / r,
      ),
    ]
  }
  // The pairs: each backend's twins, one with another account's webhook backlog; a service without and during backups.
  const pairs = c.pairs.filter((pair) => runs(pair.with).length > 0)
  const rows = pairs.flatMap((pair) => [pair.without, pair.with].flatMap((s) => rowFor(measurements, s, 'list') ?? []))
  const least = scenario.target
  const table = ratioTable(
    'req/s with / without',
    least === undefined ? undefined : [`≥ ${least}`, (r) => r >= least],
    pairs.map((p) => [p.name, runs(p.with), runs(p.without)]),
  )
  if (scenario.compare !== 'backlog') return [...statsTable(rows), ...table]
  const cells = (r: Row) => {
    const counts = runs(r.server).flatMap((m) => (m.dispatcher?.claims ? [m.dispatcher] : []))
    if (counts.length === 0) return ' 0 | n/a |'
    return ` ${int(median(counts.map((d) => d.claims)))} | ${ms(median(counts.map((d) => (d.claimSeconds / d.claims) * 1000)))} |`
  }
  return [
    `Twins seeded alike but for another account's ${backlogText(c.sizes)}. Claims: \`claimDeliveries\` calls per run`,
    "and their mean time, from the service's /metrics (medians across rounds).",
    '',
    ...statsTable(rows, { header: ' claims per run | claim ms per call |', cells }),
    ...table,
  ]
}

/** Every measured run that had errors, one line each (empty when clean). */
export function errorLines(measurements: Measurement[]): string[] {
  return measurements
    .filter((m) => m.wrk.non2xx > 0 || m.wrk.socketErrors > 0)
    .map(
      (m) =>
        `${m.scenario} round ${m.round} ${runLabel(m)}: ${m.wrk.non2xx} non-2xx of ${m.wrk.requests} responses, ` +
        `${m.wrk.socketErrors} socket errors`,
    )
}

/** Measured runs during which other processes took more than BUSY_SHARE of a core the benchmark used. */
function busyNote(measurements: Measurement[]): string {
  const busy = measurements
    .filter((m) => m.core && Math.max(m.core.server.other, m.core.load.other) > BUSY_SHARE)
    .map((m) => `${m.scenario} ${m.round} ${runLabel(m)}`)
  return (
    `Runs in which other processes took more than 10% of the server's or wrk's core (PostgreSQL, not pinned, ` +
    `counts there too): ${busy.length} of ${measurements.length}${busy.length > 0 ? `: ${busy.join('; ')}` : ''}`
  )
}

export function markdownReport(c: ReportContext): string {
  const errors = errorLines(c.measurements)
  return [
    '# Benchmark results',
    '',
    'Written by `npm run bench` (bench/run.ts; the method and the columns: bench/README.md). Figures are medians',
    'across rounds; ratios are medians of per-round ratios (lowest and highest round in brackets). Any error (a',
    'response of 400 or above, a socket error) makes the run exit 1.',
    '',
    ...c.facts.map((fact) => `- ${fact}`),
    '',
    '## Scenarios',
    '',
    ...c.scenarios.flatMap((s) => [`### ${s.name}: ${s.description(c.sizes)}`, '', ...scenarioSection(c, s)]),
    '## Errors',
    '',
    ...(errors.length === 0 ? ['None: every response was 2xx.'] : errors.map((line) => `- **${line}**`)),
    ...c.problems.map((line) => `- **${line}**`),
    '',
    '## Notes',
    '',
    ...[...c.notes, busyNote(c.measurements)].map((note) => `- ${note}`),
    '',
  ].join('\n')
}
