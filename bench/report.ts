import { backlogSection, backlogTarget } from './backlog-report.js'
import { median, ms, pairRatios, ratio, REFERENCE, ROW_HEADER, rowCells, rowFor, spread } from './report-rows.js'
import type { Measurement, ReportContext, Row } from './report-rows.js'
import { BACKLOG_TARGET, backlogText, count, SIZE_TARGET, type AccountKey, type Scenario } from './scenarios.js'

/** Above this share of a core, other processes make a run's figures doubtful. */
const BUSY_SHARE = 0.1

type Value = { text: string; met: boolean } | undefined | null

const scenarioNamed = (context: ReportContext, name: string) => context.scenarios.find((s) => s.name === name)
const ratioText = (r: Row) =>
  r.ratios.length > 0 ? spread(r.ratios) : r.server === REFERENCE ? '1.00 (itself)' : 'n/a'

/** Reference scenarios: a row per server; size scenarios: a row per service and account, small first. */
function rowsFor(context: ReportContext, scenario: Scenario): Row[] {
  const measurements = context.measurements.filter((m) => m.scenario === scenario.name)
  const accounts: AccountKey[] = scenario.compare === 'size' ? ['small', 'large'] : ['list']
  return context.servers.flatMap((server) =>
    accounts.flatMap((account) => rowFor(measurements, server, account, context.plain[server]) ?? []),
  )
}

/** Size scenarios, per service: the large account over the small one, per round; page time is 1 / req/s. */
function sizeRowsFor(context: ReportContext, scenario: Scenario) {
  const runs = (server: string, account: AccountKey) =>
    context.measurements.filter((m) => m.scenario === scenario.name && m.server === server && m.account === account)
  return context.servers.flatMap((server) => {
    const { rps, p50, p99 } = pairRatios(runs(server, 'large'), runs(server, 'small'))
    const pageTime = rps.map((r) => 1 / r)
    return rps.length === 0 ? [] : [{ server, pageTime, p50, p99, met: median(pageTime) <= SIZE_TARGET }]
  })
}

function referenceSection(context: ReportContext, scenario: Scenario): string[] {
  const rows = rowsFor(context, scenario)
  return [
    `### ${scenario.name}: ${scenario.description(context.sizes)}`,
    '',
    `| server | ${ROW_HEADER} | req/s vs reference: median (min–max) | vs plain handler |`,
    `| --- ${'| ---: '.repeat(7)}| --- | --- |`,
    ...rows.map((r) => `| ${r.server} | ${rowCells(r)} | ${ratioText(r)} | ${spread(r.vsPlain) || '–'} |`),
    '',
    ...rows
      .filter((r) => r.ratios.length > 0)
      .flatMap((r) => {
        const plain = r.vsPlain.length === 0 ? '' : `; vs plain handler ${r.vsPlain.map(ratio).join(', ')}`
        return [`${r.server} per round: vs reference ${r.ratios.map(ratio).join(', ')}${plain}`, '']
      }),
  ]
}

function sizeSection(context: ReportContext, scenario: Scenario): string[] {
  const [small, large] = [count(context.sizes.small), count(context.sizes.large)]
  const sizeRows = sizeRowsFor(context, scenario)
  return [
    `### ${scenario.name}: ${scenario.description(context.sizes)}`,
    '',
    `| server | account | ${ROW_HEADER} |`,
    `| --- ${'| ---: '.repeat(8)}|`,
    ...rowsFor(context, scenario).map(
      (r) => `| ${r.server} | ${count(context.sizes[r.account])} plants | ${rowCells(r)} |`,
    ),
    '',
    `| server | page time at ${large} / at ${small}: median (min–max) | p50 at ${large} / at ${small} | p99 at ${large} / at ${small} | target ≤ ${SIZE_TARGET} |`,
    '| --- | --- | --- | --- | --- |',
    ...sizeRows.map(
      (r) =>
        `| ${r.server} | ${spread(r.pageTime)} | ${spread(r.p50)} | ${spread(r.p99)} | ${r.met ? 'within target' : '**above target**'} |`,
    ),
    '',
    ...sizeRows.flatMap((r) => [`${r.server} page time per round: ${r.pageTime.map(ratio).join(', ')}`, '']),
  ]
}

/** A target's figure for a service from a scenario's row, or undefined when the run did not measure it. */
function fromRow(name: string, figure: (row: Row) => Value): (context: ReportContext, server: string) => Value {
  return (context, server) => {
    const scenario = scenarioNamed(context, name)
    const row = scenario && rowsFor(context, scenario).find((r) => r.server === server)
    return row && figure(row)
  }
}

const ratioTarget = (name: string, least: number) =>
  fromRow(name, (row) =>
    row.ratios.length === 0 ? undefined : { text: ratio(median(row.ratios)), met: median(row.ratios) >= least },
  )
const p99Target = (name: string, belowMs: number) =>
  fromRow(name, (row) => ({ text: `${ms(row.p99Ms)} ms`, met: row.p99Ms < belowMs }))
const isPostgres = (server: string) => server.startsWith('PostgreSQL')

function plainTarget(name: string, least: { SQLite?: number; PostgreSQL?: number }) {
  return (context: ReportContext, server: string): Value => {
    const bound = least[isPostgres(server) ? 'PostgreSQL' : 'SQLite']
    if (bound === undefined) return null
    return fromRow(name, (row) => {
      if (row.vsPlain.length === 0) return undefined
      return { text: `${ratio(median(row.vsPlain))} of plain`, met: median(row.vsPlain) >= bound }
    })(context, server)
  }
}

function sizeTarget(name: string) {
  return (context: ReportContext, server: string): Value => {
    const scenario = scenarioNamed(context, name)
    const row = scenario && sizeRowsFor(context, scenario).find((r) => r.server === server)
    return row && { text: ratio(median(row.pageTime)), met: row.met }
  }
}

/** "SQLite on Node 26" → 26; a label without Node (one binary in the run) is the harness's. */
const nodeMajorOf = (server: string) =>
  Number(/ on Node (\d+)/.exec(server)?.[1] ?? process.versions.node.split('.')[0])

/** Issues 5's, 14's and 16's targets; null when a target is not one of that backend's or Node's. */
const TARGETS: ReadonlyArray<[string, (context: ReportContext, server: string) => Value]> = [
  ['GET /plants?limit=20: ≥ 0.50 of the reference GET', ratioTarget('get', 0.5)],
  ['durable POST /plants: ≥ 0.40 of the reference POST', ratioTarget('post', 0.4)],
  ["GET p99 at 50 connections (median of the rounds' p99s): < 10 ms", p99Target('get', 10)],
  ["durable POST p99 at 50 connections (median of the rounds' p99s): < 20 ms", p99Target('post', 20)],
  [`first page, large account: ≤ ${SIZE_TARGET}× the small one's page time`, sizeTarget('size-first')],
  [`deep pages, large account: ≤ ${SIZE_TARGET}× the small one's page time`, sizeTarget('size-deep')],
  [
    `GET /plants?limit=20 while another account has a large webhook backlog: ≥ ${BACKLOG_TARGET} of the req/s without`,
    backlogTarget('backlog-get'),
  ],
  [
    `durable POST /plants while another account has a large webhook backlog: ≥ ${BACKLOG_TARGET} of the req/s without`,
    backlogTarget('backlog-post'),
  ],
  [
    'GET /plants?limit=20: ≥ 0.70 of the plain handler on SQLite, ≥ 0.60 on PostgreSQL (same Node)',
    plainTarget('get', { SQLite: 0.7, PostgreSQL: 0.6 }),
  ],
  [
    'durable POST /plants on PostgreSQL: ≥ 0.60 of the plain handler (same Node)',
    plainTarget('post', { PostgreSQL: 0.6 }),
  ],
  [
    'durable POST /plants on SQLite: ≥ 0.45 of the reference POST on Node 26, ≥ 0.35 on Node 20',
    (context, server) => {
      const least = isPostgres(server) ? undefined : { 20: 0.35, 26: 0.45 }[nodeMajorOf(server)]
      return least === undefined ? null : ratioTarget('post', least)(context, server)
    },
  ],
  [
    'peak RSS under load: < 150 MB (highest of all its runs, backlog twins included)',
    (context, server) => {
      const labels = [server, ...context.twins.filter((p) => p.backend === server).flatMap((p) => [p.without, p.with])]
      const own = context.measurements.filter((m) => labels.includes(m.server))
      if (own.length === 0) return undefined
      const peak = Math.max(...own.map((m) => m.rssBytes)) / 1e6
      return { text: `${peak.toFixed(0)} MB`, met: peak < 150 }
    },
  ],
]

/** The targets table: a column per service (not the plain handlers or twins; backlog-only backends last). */
function targetSection(context: ReportContext): string[] {
  const excluded = [REFERENCE, ...Object.values(context.plain), ...context.twins.flatMap((p) => [p.without, p.with])]
  const own = context.servers.filter((server) => !excluded.includes(server))
  const columns = [...own, ...context.twins.map((pair) => pair.backend).filter((backend) => !own.includes(backend))]
  const cell = (result: Value) =>
    result === null
      ? '–'
      : result === undefined
        ? 'not measured'
        : `${result.text} ${result.met ? 'met' : '**missed**'}`
  return [
    '## Targets (issues 5, 14 and 16)',
    '',
    `| target | ${columns.join(' | ')} |`,
    `| --- | ${columns.map(() => '---').join(' | ')} |`,
    ...TARGETS.map(([target, value]) => `| ${target} | ${columns.map((s) => cell(value(context, s))).join(' | ')} |`),
    '',
    "Where a target is missed, the README's Performance section says where the time goes and what was tried.",
    '',
  ]
}

/** "SQLite" for the listed account, "SQLite (large account)" for the others. */
const runLabel = (m: Measurement) => (m.account === 'list' ? m.server : `${m.server} (${m.account} account)`)

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
function busyNotes(measurements: Measurement[]): string[] {
  const percent = (share = 0) => `${(share * 100).toFixed(0)}%`
  const busy = measurements
    .filter((m) => m.core && (m.core.server.other > BUSY_SHARE || m.core.load.other > BUSY_SHARE))
    .map(
      (m) =>
        `${m.scenario} round ${m.round} ${runLabel(m)}: others took ${percent(m.core?.server.other)} of the ` +
        `server's core and ${percent(m.core?.load.other)} of wrk's`,
    )
  if (busy.length === 0)
    return ['- The machine was quiet: no other process took more than 10% of either core in any measured run.']
  return [
    `- Busy machine: in ${busy.length} of ${measurements.length} measured runs other processes took more than 10% of ` +
      'a core. A database on the same machine counts there too (PostgreSQL is not pinned; its processes mostly ' +
      "land on wrk's core), so for its rows such shares are expected; for the reference and SQLite they are noise:",
    ...busy.map((line) => `  - ${line}`),
  ]
}

/** The accounts the run's scenarios used, with their sizes. */
function accountsText(context: ReportContext): string {
  const { list, small, large, backlog } = context.sizes
  const uses = (kind: Scenario['compare']) => context.scenarios.some((s) => s.compare === kind)
  return [
    ...(uses('reference') ? [`listed ${count(list)} plants`] : []),
    ...(uses('size') ? [`small ${count(small)}`, `large ${count(large)}`] : []),
    ...(uses('backlog')
      ? [`backlog twins: listed ${count(list)} plants, other ${count(backlog)} (${backlogText(context.sizes)})`]
      : []),
  ].join(', ')
}

export function markdownReport(context: ReportContext): string {
  const errors = errorLines(context.measurements)
  const { small, large } = context.sizes
  return [
    '# Benchmark results',
    '',
    'Written by `npm run bench` (bench/run.ts; the method and the columns: bench/README.md). Figures are medians',
    'across rounds; ratios are medians of per-round ratios (lowest and highest round in brackets): "vs reference" the',
    'service\'s req/s over the bare node:http reference server\'s in the same round, "vs plain handler" over the plain',
    'Fastify handler of the same backend and Node (what the features cost); size scenarios: page time (1 / req/s) at',
    `${count(large)} plants over at ${count(small)}, target ≤ ${SIZE_TARGET}. Any error (a response of 400 or above, a socket error) makes`,
    'the run exit 1.',
    '',
    ...context.facts.map((fact) => `- ${fact}`),
    `- Accounts (on every service, plants with ids 1..n): ${accountsText(context)}`,
    '',
    ...targetSection(context),
    '## Scenarios',
    '',
    ...context.scenarios.flatMap((scenario) =>
      scenario.compare === 'backlog'
        ? backlogSection(context, scenario)
        : scenario.compare === 'size'
          ? sizeSection(context, scenario)
          : referenceSection(context, scenario),
    ),
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
