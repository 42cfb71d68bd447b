import { backlogSection, backlogSummary, backlogTarget, twinLabels } from './backlog-report.js'
import {
  errorText,
  int,
  ms,
  pct,
  plainText,
  ratio,
  ratioText,
  REFERENCE,
  rowFor,
  spread,
  type Measurement,
  type ReportContext,
  type Row,
} from './report-rows.js'
import { BACKLOG_TARGET, backlogText, count, SIZE_TARGET, type AccountKey, type Scenario } from './scenarios.js'
import { max, median } from './stats.js'
import type { Backend } from './databases.js'

export { REFERENCE, type CoreReport, type Measurement, type ReportContext } from './report-rows.js'

/** Above this share of a core, other processes make a run's figures doubtful. */
const BUSY_SHARE = 0.1

/** Size scenarios, one server: the large account over the small one, per round. */
interface SizeRow {
  server: string
  /** Page time (1 / req/s) at the large account over the small one. */
  pageTime: number[]
  p50: number[]
  p99: number[]
}

function scenarioMeasurements(context: ReportContext, scenario: Scenario): Measurement[] {
  return context.measurements.filter((m) => m.scenario === scenario.name)
}

/** Reference scenarios: a row per server; size scenarios: a row per service and account, small first. */
function rowsFor(context: ReportContext, scenario: Scenario): Row[] {
  const measurements = scenarioMeasurements(context, scenario)
  const accounts: AccountKey[] = scenario.compare === 'size' ? ['small', 'large'] : ['list']
  return context.servers.flatMap((server) =>
    accounts.flatMap((account) => rowFor(measurements, server, account, context.plain[server]) ?? []),
  )
}

function sizeRowsFor(context: ReportContext, scenario: Scenario): SizeRow[] {
  const measurements = scenarioMeasurements(context, scenario)
  return context.servers.flatMap((server) => {
    const pairs = measurements
      .filter((m) => m.server === server && m.account === 'large')
      .flatMap((large) => {
        const small = measurements.find((m) => m.server === server && m.account === 'small' && m.round === large.round)
        return small === undefined ? [] : [{ small: small.wrk, large: large.wrk }]
      })
    if (pairs.length === 0) return []
    return [
      {
        server,
        pageTime: pairs.map(({ small, large }) => small.rps / large.rps),
        p50: pairs.map(({ small, large }) => large.p50Ms / small.p50Ms),
        p99: pairs.map(({ small, large }) => large.p99Ms / small.p99Ms),
      },
    ]
  })
}

function verdict(row: SizeRow): string {
  return median(row.pageTime) <= SIZE_TARGET ? 'within target' : '**above target**'
}

function referenceSection(context: ReportContext, scenario: Scenario): string[] {
  const rows = rowsFor(context, scenario)
  const lines = [
    `### ${scenario.name}: ${scenario.description(context.sizes)}`,
    '',
    '| server | req/s | p50 ms | p99 ms | peak RSS MiB | errors | server core: own / other | wrk core: other | req/s vs reference: median (min–max) | vs plain handler |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.server} | ${int(r.rps)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.rssMiB.toFixed(0)} | ${errorText(r)} | ${pct(r.serverCpuPct)} / ${pct(r.otherCpuPct)} | ${pct(r.loadOtherPct)} | ${ratioText(r)} | ${plainText(r) || '–'} |`,
    ),
    '',
  ]
  for (const row of rows.filter((r) => r.ratios.length > 0)) {
    const plain = row.vsPlain.length === 0 ? '' : `; vs plain handler ${row.vsPlain.map(ratio).join(', ')}`
    lines.push(`${row.server} per round: vs reference ${row.ratios.map(ratio).join(', ')}${plain}`, '')
  }
  return lines
}

function sizeSection(context: ReportContext, scenario: Scenario): string[] {
  const rows = rowsFor(context, scenario)
  const sizeRows = sizeRowsFor(context, scenario)
  const { small, large } = context.sizes
  const lines = [
    `### ${scenario.name}: ${scenario.description(context.sizes)}`,
    '',
    '| server | account | req/s | p50 ms | p99 ms | peak RSS MiB | errors | server core: own / other | wrk core: other |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.server} | ${count(context.sizes[r.account])} plants | ${int(r.rps)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.rssMiB.toFixed(0)} | ${errorText(r)} | ${pct(r.serverCpuPct)} / ${pct(r.otherCpuPct)} | ${pct(r.loadOtherPct)} |`,
    ),
    '',
    `| server | page time at ${count(large)} / at ${count(small)}: median (min–max) | p50 at ${count(large)} / at ${count(small)} | p99 at ${count(large)} / at ${count(small)} | target ≤ ${SIZE_TARGET} |`,
    '| --- | --- | --- | --- | --- |',
    ...sizeRows.map(
      (r) => `| ${r.server} | ${spread(r.pageTime)} | ${spread(r.p50)} | ${spread(r.p99)} | ${verdict(r)} |`,
    ),
    '',
  ]
  for (const row of sizeRows) lines.push(`${row.server} page time per round: ${row.pageTime.map(ratio).join(', ')}`, '')
  return lines
}

function scenarioSection(context: ReportContext, scenario: Scenario): string[] {
  if (scenario.compare === 'backlog') return backlogSection(context, scenario)
  return scenario.compare === 'size' ? sizeSection(context, scenario) : referenceSection(context, scenario)
}

/** The servers the reference and size scenarios ran on: neither the reference nor a backlog twin. */
function measuredServers(context: ReportContext): string[] {
  const twins = context.twins.flatMap((pair) => [pair.without, pair.with])
  return context.servers.filter((server) => server !== REFERENCE && !twins.includes(server))
}

/** The services measured (not the plain handlers), each a column of the targets table, backlog-only ones last. */
function services(context: ReportContext): string[] {
  const plain = Object.values(context.plain)
  const own = measuredServers(context).filter((server) => !plain.includes(server))
  return [...own, ...context.twins.map((pair) => pair.backend).filter((backend) => !own.includes(backend))]
}

/** "- **SQLite**: get …, post …": a line per server with a figure in a scenario of the kind. */
function summaryLines(
  context: ReportContext,
  kind: Scenario['compare'],
  figure: (scenario: Scenario, server: string) => string | undefined,
): string[] {
  const scenarios = context.scenarios.filter((scenario) => scenario.compare === kind)
  return measuredServers(context).flatMap((server) => {
    const parts = scenarios.flatMap((scenario) => {
      const text = figure(scenario, server)
      return text === undefined ? [] : [`${scenario.name} ${text}`]
    })
    return parts.length === 0 ? [] : [`- **${server}**: ${parts.join('; ')}`]
  })
}

/** "get 0.16 (0.12–0.19) of the reference, 0.42 (0.38–0.47) of the plain handler". */
function referenceFigure(context: ReportContext, scenario: Scenario, server: string): string | undefined {
  const row = rowsFor(context, scenario).find((r) => r.server === server)
  if (row === undefined) return undefined
  const plain = plainText(row)
  return `${ratioText(row)} of the reference${plain === '' ? '' : `, ${plain} of the plain handler`}`
}

function sizeFigure(context: ReportContext, scenario: Scenario, server: string): string | undefined {
  const row = sizeRowsFor(context, scenario).find((r) => r.server === server)
  return row && `${spread(row.pageTime)} (${verdict(row)})`
}

/** "SQLite" for the listed account, "SQLite (large account)" for the others. */
function runLabel(m: Measurement): string {
  return m.account === 'list' ? m.server : `${m.server} (${m.account} account)`
}

/** Measured runs during which other processes took more than BUSY_SHARE of a core the benchmark used. */
export function busyLines(measurements: Measurement[]): string[] {
  const percent = (share: number): string => `${(share * 100).toFixed(0)}%`
  return measurements
    .filter((m) => m.core && (m.core.server.other > BUSY_SHARE || m.core.load.other > BUSY_SHARE))
    .map(
      (m) =>
        `${m.scenario} round ${m.round} ${runLabel(m)}: others took ${percent(m.core?.server.other ?? 0)} of the ` +
        `server's core and ${percent(m.core?.load.other ?? 0)} of wrk's`,
    )
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

function busyNotes(measurements: Measurement[]): string[] {
  const busy = busyLines(measurements)
  if (busy.length === 0)
    return ['- The machine was quiet: no other process took more than 10% of either core in any measured run.']
  return [
    `- Busy machine: in ${busy.length} of ${measurements.length} measured runs other processes took more than 10% of ` +
      'a core. A database on the same machine counts there too (PostgreSQL is not pinned; its processes mostly ' +
      "land on wrk's core), so for its rows such shares are expected; for the reference and SQLite they are noise:",
    ...busy.map((line) => `  - ${line}`),
  ]
}

function summarySections(context: ReportContext): string[] {
  const lines: string[] = []
  if (context.scenarios.some((scenario) => scenario.compare === 'reference')) {
    lines.push(
      '## Service vs reference and vs plain handler (req/s ratios)',
      '',
      ...summaryLines(context, 'reference', (scenario, server) => referenceFigure(context, scenario, server)),
      '',
    )
  }
  if (context.scenarios.some((scenario) => scenario.compare === 'size')) {
    const { small, large } = context.sizes
    lines.push(
      `## Page cost vs store size (page time at ${count(large)} plants over at ${count(small)}; target ≤ ${SIZE_TARGET})`,
      '',
      ...summaryLines(context, 'size', (scenario, server) => sizeFigure(context, scenario, server)),
      '',
    )
  }
  lines.push(...backlogSummary(context))
  return lines
}

/**
 * Issue 5's, 14's and 16's targets, one per line; `value` reads a service's figure: undefined when the run did not
 * measure it, null when the target is not one of that backend's or Node's.
 */
const TARGETS: ReadonlyArray<{
  target: string
  value: (context: ReportContext, server: string) => { text: string; met: boolean } | undefined | null
}> = [
  { target: 'GET /plants?limit=20: ≥ 0.50 of the reference GET', value: ratioTarget('get', 0.5) },
  { target: 'durable POST /plants: ≥ 0.40 of the reference POST', value: ratioTarget('post', 0.4) },
  { target: "GET p99 at 50 connections (median of the rounds' p99s): < 10 ms", value: p99Target('get', 10) },
  { target: "durable POST p99 at 50 connections (median of the rounds' p99s): < 20 ms", value: p99Target('post', 20) },
  { target: `first page, large account: ≤ ${SIZE_TARGET}× the small one's page time`, value: sizeTarget('size-first') },
  { target: `deep pages, large account: ≤ ${SIZE_TARGET}× the small one's page time`, value: sizeTarget('size-deep') },
  {
    target: `GET /plants?limit=20 while another account has a large webhook backlog: ≥ ${BACKLOG_TARGET} of the req/s without`,
    value: backlogTarget('backlog-get'),
  },
  {
    target: `durable POST /plants while another account has a large webhook backlog: ≥ ${BACKLOG_TARGET} of the req/s without`,
    value: backlogTarget('backlog-post'),
  },
  {
    target: 'GET /plants?limit=20: ≥ 0.70 of the plain handler on SQLite, ≥ 0.60 on PostgreSQL (same Node)',
    value: plainTarget('get', { SQLite: 0.7, PostgreSQL: 0.6 }),
  },
  {
    target: 'durable POST /plants on PostgreSQL: ≥ 0.60 of the plain handler (same Node)',
    value: plainTarget('post', { PostgreSQL: 0.6 }),
  },
  {
    target: 'durable POST /plants on SQLite: ≥ 0.45 of the reference POST on Node 26, ≥ 0.35 on Node 20',
    value: (context, server) => {
      const least = server.startsWith('SQLite') ? { 20: 0.35, 26: 0.45 }[nodeMajorOf(server)] : undefined
      return least === undefined ? null : ratioTarget('post', least)(context, server)
    },
  },
  {
    target: 'peak RSS under load: < 150 MB (highest of all its runs, backlog twins included)',
    value: (context, server) => {
      const labels = [server, ...twinLabels(context, server)]
      const own = context.measurements.filter((m) => labels.includes(m.server))
      if (own.length === 0) return undefined
      const peak = max(own.map((m) => m.rssBytes)) / 1e6
      return { text: `${peak.toFixed(0)} MB`, met: peak < 150 }
    },
  },
]

function scenarioNamed(context: ReportContext, name: string): Scenario | undefined {
  return context.scenarios.find((scenario) => scenario.name === name)
}

function rowNamed(context: ReportContext, name: string, server: string) {
  const scenario = scenarioNamed(context, name)
  return scenario && rowsFor(context, scenario).find((r) => r.server === server)
}

function ratioTarget(name: string, least: number): (typeof TARGETS)[number]['value'] {
  return (context, server) => {
    const row = rowNamed(context, name, server)
    if (row === undefined || row.ratios.length === 0) return undefined
    return { text: ratio(median(row.ratios)), met: median(row.ratios) >= least }
  }
}

/** "SQLite on Node 26" → 26; a label without Node (one binary in the run) is the harness's. */
function nodeMajorOf(server: string): number {
  const tagged = / on Node (\d+)/.exec(server)?.[1]
  return Number(tagged ?? process.versions.node.split('.')[0])
}

function plainTarget(name: string, least: Partial<Record<Backend, number>>): (typeof TARGETS)[number]['value'] {
  return (context, server) => {
    const bound = least[server.startsWith('PostgreSQL') ? 'PostgreSQL' : 'SQLite']
    if (bound === undefined) return null
    const row = rowNamed(context, name, server)
    if (row === undefined || row.vsPlain.length === 0) return undefined
    return { text: `${ratio(median(row.vsPlain))} of plain`, met: median(row.vsPlain) >= bound }
  }
}

function p99Target(name: string, belowMs: number): (typeof TARGETS)[number]['value'] {
  return (context, server) => {
    const row = rowNamed(context, name, server)
    return row && { text: `${ms(row.p99Ms)} ms`, met: row.p99Ms < belowMs }
  }
}

function sizeTarget(name: string): (typeof TARGETS)[number]['value'] {
  return (context, server) => {
    const scenario = scenarioNamed(context, name)
    const row = scenario && sizeRowsFor(context, scenario).find((r) => r.server === server)
    return row && { text: ratio(median(row.pageTime)), met: median(row.pageTime) <= SIZE_TARGET }
  }
}

/** The targets table: a column per backend, each figure marked met or missed. */
function targetSection(context: ReportContext): string[] {
  const columns = services(context)
  const rows = TARGETS.map(({ target, value }) => {
    const cells = columns.map((server) => {
      const result = value(context, server)
      if (result === null) return '–'
      return result === undefined ? 'not measured' : `${result.text} ${result.met ? 'met' : '**missed**'}`
    })
    return `| ${target} | ${cells.join(' | ')} |`
  })
  return [
    '## Targets (issues 5, 14 and 16)',
    '',
    `| target | ${columns.join(' | ')} |`,
    `| --- | ${columns.map(() => '---').join(' | ')} |`,
    ...rows,
    '',
    "Where a target is missed, the README's Performance section says where the time goes and what was tried.",
    '',
  ]
}

/** The accounts the run's scenarios used, with their sizes. */
function accountsText(context: ReportContext): string {
  const { list, small, large } = context.sizes
  const parts: string[] = []
  if (context.scenarios.some((s) => s.compare === 'reference')) parts.push(`listed ${count(list)} plants`)
  if (context.scenarios.some((s) => s.compare === 'size')) parts.push(`small ${count(small)}`, `large ${count(large)}`)
  if (context.scenarios.some((s) => s.compare === 'backlog')) {
    parts.push(
      `backlog twins: listed ${count(list)} plants, other ${count(context.sizes.backlog)} (${backlogText(context.sizes)})`,
    )
  }
  return parts.join(', ')
}

export function markdownReport(context: ReportContext): string {
  const errors = errorLines(context.measurements)
  const { small, large } = context.sizes
  return [
    '# Benchmark results',
    '',
    'Written by `npm run bench` (bench/run.ts). Figures are medians across rounds; "vs reference" is the median',
    "of per-round ratios, service req/s over the reference server's req/s in the same round (1.00 would mean the",
    'service is as fast as bare node:http), with the lowest and highest round in brackets. "vs plain handler" is',
    'the same against the plain Fastify handler of the same backend on the same Node (bench/plain-server.ts: route,',
    'bearer compare, keyset page, insert with the same durability, nothing else): what the features cost.',
    '',
    ...(context.scenarios.some((s) => s.compare === 'size')
      ? [
          'The size scenarios run on the services only: in every round each service serves the same requests on an',
          `account of ${count(small)} plants and on one of ${count(large)}, one after the other (the order flips every round).`,
          'Page time is 1 / req/s of a run (with wrk keeping every connection busy, the time the server spends per',
          `page); the ratio at ${count(large)} over at ${count(small)} is taken per round, and its median should stay at or below`,
          `${SIZE_TARGET}: a keyset page should not cost more in a bigger store. p50 and p99 ratios are per round too.`,
          '',
        ]
      : []),
    "Columns: p50 and p99 are latency percentiles from wrk; peak RSS is the server process's highest resident",
    'memory during the measured run; "server core: own / other" is the share of the servers\' CPU the server',
    'process used (near 100%: the server is the bottleneck; lower: it waited for the disk or the database, or wrk',
    'could not keep up) and the share everything else used (other processes, the database, kernel threads',
    'writing to disk); "wrk core: other" is what else ran on the load generator\'s CPU; errors counts',
    'responses of 400 and above plus socket errors, and any error makes `npm run bench` exit 1.',
    '',
    `- Date: ${context.date.toISOString()}`,
    `- Command: \`${context.command}\``,
    `- Mode: ${context.mode}`,
    `- Accounts (on every service, plants with ids 1..n): ${accountsText(context)}`,
    `- Machine: ${context.machine}`,
    `- Software: ${context.software}`,
    `- Pinning: ${context.pinning}`,
    `- Service: ${context.service}`,
    '',
    ...summarySections(context),
    ...targetSection(context),
    '## Scenarios',
    '',
    ...context.scenarios.flatMap((scenario) => scenarioSection(context, scenario)),
    ...context.sections,
    '## How the data was seeded',
    '',
    ...context.seeding.map((line) => `- ${line}`),
    '',
    '## Errors',
    '',
    ...(errors.length === 0 ? ['None: every response was 2xx.'] : errors.map((line) => `- **${line}**`)),
    ...context.problems.flatMap((line) => ['', `- **${line}**`]),
    '',
    '## Notes',
    '',
    ...context.notes.map((note) => `- ${note}`),
    ...busyNotes(context.measurements),
    '',
  ].join('\n')
}
