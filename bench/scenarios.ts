/**
 * The scenarios, a row each (and a script under bench/lua/). 'reference' ones run on every server, the reference
 * included; 'size' ones on the services only, each on a small and a large account in turn; 'backlog' ones on the
 * twin services per backend, with and without another account's webhook backlog in turn (bench/README.md).
 */
export interface Scenario {
  name: string
  /** What is measured, for the report. */
  description: (sizes: BenchSizes) => string
  lua: string
  compare: 'reference' | 'size' | 'backlog'
  /** 'fresh': POSTs new plants (the run gets an id block of its own); 'existing': DELETEs plants that exist. */
  ids: 'none' | 'fresh' | 'existing'
  /** 'deep': the harness gives the script cursors to pages spread across the account. */
  pages?: 'deep'
  /** Extra environment for the script (bench/lua/common.lua). */
  env?: Record<string, string>
}

/** Every service's accounts, plants 1..n: `list` is read and written by the reference scenarios, the others only read. */
export interface AccountSizes {
  list: number
  small: number
  large: number
}
export type AccountKey = keyof AccountSizes

/** The accounts' sizes, and the events queued per subscription of the backlog scenarios' noisy account. */
export interface BenchSizes extends AccountSizes {
  backlog: number
}

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
/** The backlog scenarios' target (issue 14): req/s with another account's backlog ≥ 0.9 of without. */
export const BACKLOG_TARGET = 0.9

export const LIST_LIMIT = 20
export const LIST_PATH = `/plants?limit=${LIST_LIMIT}`

/** 1000 → "1k", 1000000 → "1M", else with separators. */
export function count(n: number): string {
  if (n >= 1e6 && n % 1e6 === 0) return `${n / 1e6}M`
  if (n >= 1e3 && n % 1e3 === 0) return `${n / 1e3}k`
  return n.toLocaleString('en-US')
}

/** "500k queued deliveries (10 subscriptions × 50k)". */
export function backlogText(sizes: BenchSizes): string {
  return `${count(sizes.backlog * BACKLOG_SUBSCRIPTIONS)} queued deliveries (${BACKLOG_SUBSCRIPTIONS} subscriptions × ${count(sizes.backlog)})`
}

const first = `GET ${LIST_PATH} (first page)`
const deep = `GET ${LIST_PATH}&cursor=… (keyset pages at random positions)`
const sizes = (s: BenchSizes) => `on an account of ${count(s.large)} plants vs one of ${count(s.small)}`
const backlog = (s: BenchSizes) => `while another account holds ${backlogText(s)}, vs without`

/** A scenario's row: name, script, kind, ids, description, and any more. */
function row(
  name: string,
  lua: string,
  compare: Scenario['compare'],
  ids: Scenario['ids'],
  description: Scenario['description'],
  more: Partial<Scenario> = {},
): Scenario {
  return { name, lua, compare, ids, description, ...more }
}

export const SCENARIOS: readonly Scenario[] = [
  row('get', 'get.lua', 'reference', 'none', (s) => `${first} on an account of ${count(s.list)} plants`),
  row('post', 'post.lua', 'reference', 'fresh', () => 'POST /plants with fresh ids'),
  row('mix', 'mix.lua', 'reference', 'fresh', () => `90% GET ${LIST_PATH}, 10% POST /plants with fresh ids`, {
    env: { PLANTSTORE_BENCH_WRITE_EVERY: '10' },
  }),
  row('delete', 'delete.lua', 'reference', 'existing', () => 'DELETE /plants/{id} of existing plants, each id once'),
  row('size-first', 'get.lua', 'size', 'none', (s) => `${first} ${sizes(s)}`),
  row('size-deep', 'deep.lua', 'size', 'none', (s) => `${deep} ${sizes(s)}`, { pages: 'deep' }),
  row('backlog-get', 'get.lua', 'backlog', 'none', (s) => `${first} on the listed account ${backlog(s)}`),
  row('backlog-post', 'post.lua', 'backlog', 'fresh', (s) => `POST /plants with fresh ids ${backlog(s)}`),
]

/** The scenarios named in `list` (comma-separated), in the table's order; throws on an unknown name. */
export function selectScenarios(list: string): Scenario[] {
  const names = list
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '')
  const unknown = names.find((name) => !SCENARIOS.some((scenario) => scenario.name === name))
  if (unknown !== undefined) {
    throw new Error(`--scenarios: unknown scenario "${unknown}"; known: ${SCENARIOS.map((s) => s.name).join(', ')}`)
  }
  return SCENARIOS.filter((scenario) => names.includes(scenario.name))
}
