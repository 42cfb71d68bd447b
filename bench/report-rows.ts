/** What the report builds on: the measured runs, a server's medians across rounds, per-round ratios, how figures read. */
import type { CoreShares } from './machine.js'
import type { DispatcherCounts } from './http.js'
import type { AccountKey } from './scenarios.js'
import type { WrkResult } from './wrk.js'

export const REFERENCE = 'reference'

/** One measured (not warm-up) run. */
export interface Measurement {
  scenario: string
  round: number
  server: string
  account: AccountKey
  wrk: WrkResult
  rssBytes: number
  /** The server's core (own: the server) and wrk's (own: wrk); undefined when not pinned. */
  core: { server: CoreShares; load: CoreShares } | undefined
  /** Backlog scenarios: the webhook dispatcher's work during the run, from the service's metrics. */
  dispatcher?: DispatcherCounts | undefined
}

/** Median of a non-empty list (mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  if (sorted.length % 2 === 1) return sorted[middle] ?? NaN
  return ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2
}

/** Per round, `over`'s run against `under`'s of the same round: req/s, p50 and p99 ratios (empty when none pair). */
export function pairRatios(over: Measurement[], under: Measurement[]) {
  const pairs = over.flatMap((o) => under.filter((u) => u.round === o.round).map((u) => [o.wrk, u.wrk] as const))
  const ratios = (pick: (w: WrkResult) => number) => pairs.map(([o, u]) => pick(o) / pick(u))
  return { rps: ratios((w) => w.rps), p50: ratios((w) => w.p50Ms), p99: ratios((w) => w.p99Ms) }
}

/** A server's row in one scenario: medians across rounds; `plain`, the plain handler a service is compared with. */
export function rowFor(measurements: Measurement[], server: string, account: AccountKey, plain?: string) {
  const own = measurements.filter((m) => m.server === server && m.account === account)
  if (own.length === 0) return undefined
  const mid = (pick: (m: Measurement) => number) => median(own.map(pick))
  const cores = own.every((m) => m.core !== undefined)
  const core = (pick: (c: NonNullable<Measurement['core']>) => number) =>
    cores ? mid((m) => (m.core ? pick(m.core) : 0)) : undefined
  const baseline = (label: string) => measurements.filter((m) => m.server === label && label !== server)
  return {
    server,
    account,
    rps: mid((m) => m.wrk.rps),
    p50Ms: mid((m) => m.wrk.p50Ms),
    p99Ms: mid((m) => m.wrk.p99Ms),
    rssMiB: mid((m) => m.rssBytes / 2 ** 20),
    errors: own.reduce((sum, m) => sum + m.wrk.non2xx + m.wrk.socketErrors, 0),
    /** Shares of a core: the server's own and everyone else's on its core, everyone else's on wrk's. */
    cores: [core((c) => c.server.own), core((c) => c.server.other), core((c) => c.load.other)],
    /** Req/s over the reference's per round (empty for the reference), and a service's over its plain handler's. */
    ratios: pairRatios(own, baseline(REFERENCE)).rps,
    vsPlain: pairRatios(own, baseline(plain ?? '')).rps,
  }
}
export type Row = NonNullable<ReturnType<typeof rowFor>>

export const int = (n: number): string => Math.round(n).toLocaleString('en-US')
export const ms = (n: number): string => (n < 10 ? n.toFixed(2) : n.toFixed(1))
const ratio = (r: number): string => r.toFixed(2)
const pct = (share: number | undefined): string => (share === undefined ? 'n/a' : `${(share * 100).toFixed(0)}%`)
/** "0.42 (0.40–0.45)": median (min–max); '' for none. */
export const spread = (values: number[]): string =>
  values.length === 0 ? '' : `${ratio(median(values))} (${ratio(Math.min(...values))}–${ratio(Math.max(...values))})`

/** The columns every scenario table starts with, after the server (and account). */
export const ROW_HEADER = 'req/s | p50 ms | p99 ms | peak RSS MiB | errors | server core: own / other | wrk core: other'
export const rowCells = (r: Row): string =>
  `${int(r.rps)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.rssMiB.toFixed(0)} | ${r.errors > 0 ? `**${int(r.errors)}**` : 0} | ` +
  `${pct(r.cores[0])} / ${pct(r.cores[1])} | ${pct(r.cores[2])}`
