/** What the report's sections build on: the measured runs, a server's medians across rounds, how figures read. */
import type { DispatcherCounts } from './claims.js'
import type { CoreShares } from './core-usage.js'
import type { AccountKey, BenchSizes, Scenario } from './scenarios.js'
import type { WrkResult } from './wrk.js'

export const REFERENCE = 'reference'

/** A backend's twin services, by their report labels. */
export interface TwinPair {
  backend: string
  without: string
  with: string
}

export interface ReportContext {
  /** The run's facts, "Key: value" each (date, command, machine, software…). */
  facts: string[]
  sizes: BenchSizes
  scenarios: Scenario[]
  /** Server labels in run order, reference first. */
  servers: string[]
  /** Each service's label → the label of the plain handler on the same backend and Node. */
  plain: Record<string, string>
  twins: TwinPair[]
  measurements: Measurement[]
  /** How the databases were filled, the notes, failed checks (writes acknowledged but lost): a line each. */
  seeding: string[]
  notes: string[]
  problems: string[]
  /** Sections measured apart from the scenarios' rounds (bench/backup-load.ts), Markdown lines. */
  sections: string[]
}

/** One measured (not warm-up) run. */
export interface Measurement {
  scenario: string
  round: number
  server: string
  account: AccountKey
  wrk: WrkResult
  rssBytes: number
  core: CoreReport | undefined
  /** Backlog scenarios: the webhook dispatcher's work during the run, from the service's metrics. */
  dispatcher?: DispatcherCounts
}

/** The server's core (own: the server) and wrk's core (own: wrk); undefined when not pinned. */
export interface CoreReport {
  server: CoreShares
  load: CoreShares
}

/** Medians across rounds for one server (and account) in one scenario. */
export interface Row {
  server: string
  account: AccountKey
  rps: number
  p50Ms: number
  p99Ms: number
  rssMiB: number
  non2xx: number
  socketErrors: number
  /** Medians in percent: the server's share of its core, other processes' shares of that core and of wrk's. */
  serverCpuPct: number | undefined
  otherCpuPct: number | undefined
  loadOtherPct: number | undefined
  /** Req/s over the reference's per round (empty for the reference), and a service's over its plain handler's. */
  ratios: number[]
  vsPlain: number[]
}

/** Median of a non-empty list (mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  if (sorted.length % 2 === 1) return sorted[middle] ?? NaN
  return ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2
}

function corePct(measurements: Measurement[], share: (core: CoreReport) => number) {
  if (measurements.some((m) => m.core === undefined)) return undefined
  return median(measurements.map((m) => (m.core ? share(m.core) : 0) * 100))
}

/** Each run's req/s over `baseline`'s in the same round (empty without a baseline). */
function perRound(own: Measurement[], measurements: Measurement[], baseline: string | undefined): number[] {
  return own.flatMap((m) => {
    const base = measurements.find((b) => b.server === baseline && b.round === m.round && b.server !== m.server)
    return base === undefined ? [] : [m.wrk.rps / base.wrk.rps]
  })
}

/** A server's row in one scenario; `plain`, the plain handler a service is compared with too. */
export function rowFor(measurements: Measurement[], server: string, account: AccountKey, plain?: string) {
  const own = measurements.filter((m) => m.server === server && m.account === account)
  if (own.length === 0) return undefined
  const row: Row = {
    server,
    account,
    rps: median(own.map((m) => m.wrk.rps)),
    p50Ms: median(own.map((m) => m.wrk.p50Ms)),
    p99Ms: median(own.map((m) => m.wrk.p99Ms)),
    rssMiB: median(own.map((m) => m.rssBytes / 2 ** 20)),
    non2xx: own.reduce((sum, m) => sum + m.wrk.non2xx, 0),
    socketErrors: own.reduce((sum, m) => sum + m.wrk.socketErrors, 0),
    serverCpuPct: corePct(own, (core) => core.server.own),
    otherCpuPct: corePct(own, (core) => core.server.other),
    loadOtherPct: corePct(own, (core) => core.load.other),
    ratios: perRound(own, measurements, REFERENCE),
    vsPlain: perRound(own, measurements, plain),
  }
  return row
}

/** Per round, `over`'s run against `under`'s of the same round: req/s, p50 and p99 ratios (empty when none pair). */
export function pairRatios(over: Measurement[], under: Measurement[]) {
  const pairs = over.flatMap((o) => under.filter((u) => u.round === o.round).map((u) => [o.wrk, u.wrk] as const))
  const ratios = (pick: (w: WrkResult) => number) => pairs.map(([o, u]) => pick(o) / pick(u))
  return { rps: ratios((w) => w.rps), p50: ratios((w) => w.p50Ms), p99: ratios((w) => w.p99Ms) }
}

export const int = (n: number): string => Math.round(n).toLocaleString('en-US')
export const ms = (n: number): string => (n < 10 ? n.toFixed(2) : n.toFixed(1))
export const ratio = (r: number): string => r.toFixed(2)
export const pct = (n: number | undefined): string => (n === undefined ? 'n/a' : `${n.toFixed(0)}%`)
/** "0.42 (0.40–0.45)": median (min–max); '' for none. */
export const spread = (values: number[]): string =>
  values.length === 0 ? '' : `${ratio(median(values))} (${ratio(Math.min(...values))}–${ratio(Math.max(...values))})`

/** The columns every scenario table starts with, after the server (and account). */
export const ROW_HEADER = 'req/s | p50 ms | p99 ms | peak RSS MiB | errors | server core: own / other | wrk core: other'
export function rowCells(r: Row): string {
  const errors =
    r.non2xx === 0 && r.socketErrors === 0 ? '0' : `**${int(r.non2xx)} non-2xx, ${int(r.socketErrors)} socket**`
  return (
    `${int(r.rps)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.rssMiB.toFixed(0)} | ${errors} | ` +
    `${pct(r.serverCpuPct)} / ${pct(r.otherCpuPct)} | ${pct(r.loadOtherPct)}`
  )
}
