/**
 * What every section of the report builds on: the measured runs, a server's medians across rounds, and how
 * figures are written.
 */
import type { DispatcherCounts } from './claims.js'
import type { CoreShares } from './core-usage.js'
import type { AccountKey, BenchSizes, Scenario } from './scenarios.js'
import { max, median, min } from './stats.js'
import type { WrkResult } from './wrk.js'

export const REFERENCE = 'reference'

/** A backend's twin services, by their report labels. */
export interface TwinPair {
  backend: string
  without: string
  with: string
}

export interface ReportContext {
  date: Date
  command: string
  mode: string
  machine: string
  software: string
  pinning: string
  service: string
  sizes: BenchSizes
  scenarios: Scenario[]
  /** Server labels in run order, reference first. */
  servers: string[]
  /** Each service's label → the label of the plain handler on the same backend and Node. */
  plain: Record<string, string>
  /** The backlog scenarios' twin services per backend (their labels are in `servers` too). */
  twins: TwinPair[]
  measurements: Measurement[]
  /** How the databases were filled, a line each. */
  seeding: string[]
  notes: string[]
  /** Failed checks other than error responses (writes acknowledged but not stored), a line each. */
  problems: string[]
  /** Sections of measurements made apart from the scenarios' rounds (bench/backup-load.ts), Markdown lines. */
  sections: string[]
}

/** One measured (not warm-up) run. */
export interface Measurement {
  scenario: string
  round: number
  server: string
  /** The account the run read or wrote. */
  account: AccountKey
  wrk: WrkResult
  rssBytes: number
  /** How the server's and wrk's cores were used during the run; undefined when not pinned. */
  core: CoreReport | undefined
  /** Backlog scenarios: the webhook dispatcher's work during the run, from the service's metrics. */
  dispatcher?: DispatcherCounts
}

/** The server's core (own: the server) and the load generator's core (own: wrk). */
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
  /** Reference scenarios: service req/s over the reference's, per round (empty for the reference itself). */
  ratios: number[]
  /** Reference scenarios, services: req/s over the plain handler's of the same backend and Node, per round. */
  vsPlain: number[]
}

function corePct(measurements: Measurement[], share: (core: CoreReport) => number): number | undefined {
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
export function rowFor(
  measurements: Measurement[],
  server: string,
  account: AccountKey,
  plain?: string,
): Row | undefined {
  const own = measurements.filter((m) => m.server === server && m.account === account)
  if (own.length === 0) return undefined
  return {
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
}

export const int = (n: number): string => Math.round(n).toLocaleString('en-US')
export const ms = (n: number): string => (n < 10 ? n.toFixed(2) : n.toFixed(1))
export const ratio = (r: number): string => r.toFixed(2)
export const pct = (n: number | undefined): string => (n === undefined ? 'n/a' : `${n.toFixed(0)}%`)
export const spread = (values: number[]): string =>
  `${ratio(median(values))} (${ratio(min(values))}–${ratio(max(values))})`

export function ratioText(row: Row): string {
  if (row.ratios.length === 0) return row.server === REFERENCE ? '1.00 (itself)' : 'n/a'
  return spread(row.ratios)
}

/** "0.42 (0.40–0.45)" for a service; '' for a server without a plain handler to compare with. */
export function plainText(row: Row): string {
  return row.vsPlain.length === 0 ? '' : spread(row.vsPlain)
}

export function errorText(row: Row): string {
  if (row.non2xx === 0 && row.socketErrors === 0) return '0'
  return `**${int(row.non2xx)} non-2xx, ${int(row.socketErrors)} socket**`
}
