/**
 * The benchmark's scenarios, one row each: add a row (and its Lua script under bench/lua/) to add a scenario.
 *
 * Three kinds. 'reference' scenarios run against the reference server too, which answers the same requests with
 * the least work Node can do, so the ratio service / reference says how much of the machine's ceiling the service
 * reaches. 'size' scenarios run on the services only, each on an account of few plants and one of many, in turn
 * within every round, so the ratio large / small says whether a page costs more in a bigger store. 'backlog'
 * scenarios run on twin services per backend, seeded alike but for one account's large webhook backlog, in turn
 * within every round, so the ratio with / without says whether one tenant's backlog slows another (issue 14).
 */
export interface Scenario {
  name: string
  /** What is measured, for the report; `sizes` are the accounts' plant counts and the backlog of this run. */
  description: (sizes: BenchSizes) => string
  /** Script under bench/lua/. */
  lua: string
  compare: 'reference' | 'size' | 'backlog'
  /**
   * Ids the script needs: 'none'; 'fresh' (POSTs new plants: the run gets an id block of its own); 'existing'
   * (DELETEs plants that exist: the harness hands it ids it knows were created and not deleted yet).
   */
  ids: 'none' | 'fresh' | 'existing'
  /** 'deep': the harness gives the script cursors to pages spread across the account (size scenarios). */
  pages?: 'first' | 'deep'
  /** Extra environment for the Lua script (see bench/lua/common.lua). */
  env?: Record<string, string>
}

/**
 * The accounts every service holds, each with plants 1..n: `list` is the one the reference scenarios read and
 * write; `small` and `large` are compared by the size scenarios and nothing writes to them.
 */
export interface AccountSizes {
  list: number
  small: number
  large: number
}
export type AccountKey = keyof AccountSizes

/** The accounts' sizes and the backlog scenarios' noisy account: events queued for each of its subscriptions. */
export interface BenchSizes extends AccountSizes {
  backlog: number
}

/** The account names given to `plantstore tokens create`. */
export const ACCOUNT_NAMES: Record<AccountKey, string> = {
  list: 'bench-list',
  small: 'bench-small',
  large: 'bench-large',
}

/**
 * The backlog scenarios' other account: it holds plants 1..backlog and BACKLOG_SUBSCRIPTIONS webhook subscriptions
 * (the default per-account cap), and on the twin with the backlog each plant's plant.created event is queued for
 * every subscription. Nothing measured reads or writes it.
 */
export const NOISY_ACCOUNT = 'bench-noisy'
export const BACKLOG_SUBSCRIPTIONS = 10

/** Page time at the large account over the small one that the size scenarios aim at (issue 5). */
export const SIZE_TARGET = 1.5

/** Req/s of the listed account with another account's backlog over without it, at the least (issue 14). */
export const BACKLOG_TARGET = 0.9

/** The list request every reading scenario sends; the reference serves the matching 20 plants. */
export const LIST_LIMIT = 20
export const LIST_PATH = `/plants?limit=${LIST_LIMIT}`

/** 1000 → "1k", 1000000 → "1M", else with separators. */
export function count(n: number): string {
  if (n >= 1e6 && n % 1e6 === 0) return `${n / 1e6}M`
  if (n >= 1e3 && n % 1e3 === 0) return `${n / 1e3}k`
  return n.toLocaleString('en-US')
}

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'get',
    description: (sizes) => `GET ${LIST_PATH} (first page) on an account of ${count(sizes.list)} plants`,
    lua: 'get.lua',
    compare: 'reference',
    ids: 'none',
  },
  {
    name: 'post',
    description: () => 'POST /plants with fresh ids',
    lua: 'post.lua',
    compare: 'reference',
    ids: 'fresh',
  },
  {
    name: 'mix',
    description: () => `90% GET ${LIST_PATH}, 10% POST /plants with fresh ids`,
    lua: 'mix.lua',
    compare: 'reference',
    ids: 'fresh',
    env: { PLANTSTORE_BENCH_WRITE_EVERY: '10' },
  },
  {
    name: 'delete',
    description: () => 'DELETE /plants/{id} of existing plants, each id once',
    lua: 'delete.lua',
    compare: 'reference',
    ids: 'existing',
  },
  {
    name: 'size-first',
    description: (sizes) =>
      `GET ${LIST_PATH} (first page) on an account of ${count(sizes.large)} plants vs one of ${count(sizes.small)}`,
    lua: 'get.lua',
    compare: 'size',
    ids: 'none',
    pages: 'first',
  },
  {
    name: 'size-deep',
    description: (sizes) =>
      `GET ${LIST_PATH}&cursor=… (keyset pages at random positions across the account) on an account of ` +
      `${count(sizes.large)} plants vs one of ${count(sizes.small)}`,
    lua: 'deep.lua',
    compare: 'size',
    ids: 'none',
    pages: 'deep',
  },
  {
    name: 'backlog-get',
    description: (sizes) =>
      `GET ${LIST_PATH} (first page) on the listed account while another holds ${backlogText(sizes)}, vs without`,
    lua: 'get.lua',
    compare: 'backlog',
    ids: 'none',
  },
  {
    name: 'backlog-post',
    description: (sizes) => `POST /plants with fresh ids while another account holds ${backlogText(sizes)}, vs without`,
    lua: 'post.lua',
    compare: 'backlog',
    ids: 'fresh',
  },
]

/** "500k queued deliveries (10 subscriptions × 50k)". */
export function backlogText(sizes: BenchSizes): string {
  return `${count(sizes.backlog * BACKLOG_SUBSCRIPTIONS)} queued deliveries (${BACKLOG_SUBSCRIPTIONS} subscriptions × ${count(sizes.backlog)})`
}

/** The scenarios named in `list` (comma-separated), in the table's order; throws on an unknown name. */
export function selectScenarios(list: string): Scenario[] {
  const names = list
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '')
  for (const name of names) {
    if (!SCENARIOS.some((scenario) => scenario.name === name)) {
      throw new Error(`--scenarios: unknown scenario "${name}"; known: ${SCENARIOS.map((s) => s.name).join(', ')}`)
    }
  }
  return SCENARIOS.filter((scenario) => names.includes(scenario.name))
}
