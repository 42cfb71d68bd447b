/**
 * The scenarios, a row each (`requests`: what bench/wrk-script.lua sends). 'reference' ones run on every server,
 * the reference included; 'size' ones on the services only, each on a small and a large account in turn; 'backlog'
 * ones on the twin services per backend, with and without another account's webhook backlog in turn; 'backup' on
 * one SQLite service, with and without backups running; 'cors' and 'idempotency' on each service of the first Node,
 * with and without the header (bench/README.md).
 */
export interface Scenario {
  name: string
  /** What is measured, for the report. */
  description: (sizes: BenchSizes) => string
  requests: 'get' | 'post' | 'mix' | 'delete' | 'deep'
  compare: 'reference' | 'size' | 'backlog' | 'backup' | 'cors' | 'idempotency' | 'tracing'
  /** The pairs' target: req/s with (the backlog, backups) over without, at least. */
  target?: number
}

/**
 * Plants per account (ids 1..n; `list` is read and written by the reference scenarios, the others only read), and
 * `backlog`: the events queued per subscription of the backlog scenarios' noisy account.
 */
export type AccountKey = 'list' | 'small' | 'large'
export type BenchSizes = Record<AccountKey | 'backlog', number>

export const ACCOUNT_NAMES: Record<AccountKey, string> = {
  list: 'bench-list',
  small: 'bench-small',
  large: 'bench-large',
}

/** The backlog scenarios' other account: plants 1..backlog and this many subscriptions (the per-account cap). */
export const NOISY_ACCOUNT = 'bench-noisy'
export const BACKLOG_SUBSCRIPTIONS = 10

/** The size scenarios' target (issue 5): page time at the large account ≤ 1.5 × at the small one. */
export const SIZE_TARGET = 1.5

export const LIST_LIMIT = 20
export const LIST_PATH = `/plants?limit=${LIST_LIMIT}`

/** 1000 → "1k", 1000000 → "1M", else with separators. */
export function count(n: number): string {
  if (n >= 1e6 && n % 1e6 === 0) return `${n / 1e6}M`
  if (n >= 1e3 && n % 1e3 === 0) return `${n / 1e3}k`
  return n.toLocaleString('en-US')
}

/** "500k queued deliveries (10 subscriptions × 50k)". */
export const backlogText = (s: BenchSizes) =>
  `${count(s.backlog * BACKLOG_SUBSCRIPTIONS)} queued deliveries (${BACKLOG_SUBSCRIPTIONS} subscriptions × ${count(s.backlog)})`

const first = `GET ${LIST_PATH} (first page)`
const deep = `GET ${LIST_PATH}&cursor=… (keyset pages at random positions)`
const sizes = (s: BenchSizes) => `on an account of ${count(s.large)} plants vs one of ${count(s.small)}`
const backlog = (s: BenchSizes) => `while another account holds ${backlogText(s)}, vs without`

export const SCENARIOS: readonly Scenario[] = [
  { name: 'get', requests: 'get', compare: 'reference', description: (s) => `${first} on ${count(s.list)} plants` },
  { name: 'post', requests: 'post', compare: 'reference', description: () => 'POST /plants, fresh ids' },
  {
    ...{ name: 'mix', requests: 'mix', compare: 'reference' },
    description: () => `90% GET ${LIST_PATH}, 10% POST /plants with fresh ids`,
  },
  {
    ...{ name: 'delete', requests: 'delete', compare: 'reference' },
    description: () => 'DELETE /plants/{id} of existing plants, each id once',
  },
  { name: 'size-first', requests: 'get', compare: 'size', description: (s) => `${first} ${sizes(s)}` },
  { name: 'size-deep', requests: 'deep', compare: 'size', description: (s) => `${deep} ${sizes(s)}` },
  // Issue 14: with another account's backlog ≥ 0.9 of without; issue 27: during backups ≥ 0.8 of without.
  {
    ...{ name: 'backlog-get', requests: 'get', compare: 'backlog', target: 0.9 },
    description: (s) => `${first}, listed ${backlog(s)}`,
  },
  {
    ...{ name: 'backlog-post', requests: 'post', compare: 'backlog', target: 0.9 },
    description: (s) => `POST /plants with fresh ids ${backlog(s)}`,
  },
  {
    ...{ name: 'backup-load', requests: 'post', compare: 'backup', target: 0.8 },
    description: (s) =>
      `POST /plants with fresh ids on ${count(s.large)} plants while \`plantstore backup\` copies the store back to back, vs without`,
  },
  { name: 'cors-get', requests: 'get', compare: 'cors', description: () => `${first} with an allowed Origin` },
  { name: 'tracing-get', requests: 'get', compare: 'tracing', description: () => `${first} traced (all; 1%)` },
  { name: 'idempotency-post', requests: 'post', compare: 'idempotency', description: () => 'POST /plants with keys' },
]
