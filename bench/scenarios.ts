/**
 * The benchmark's scenarios, one row each: add a row (and its Lua script under bench/lua/) to add a scenario.
 * Every scenario runs against the reference server too, which answers the same requests with the least work
 * Node can do, so the ratio service / reference says how much of the machine's ceiling the service reaches.
 */
export interface Scenario {
  name: string
  /** What is measured, for the report. */
  description: string
  /** Script under bench/lua/. */
  lua: string
  /**
   * Ids the script needs: 'none'; 'fresh' (POSTs new plants: the run gets an id block of its own); 'existing'
   * (DELETEs plants that exist: the harness hands it ids it knows were created and not deleted yet).
   */
  ids: 'none' | 'fresh' | 'existing'
  /** Plants the listed account must hold (ids 1..n) before the scenario runs; the options' seed when absent. */
  plants?: number
  /** Extra environment for the Lua script (see bench/lua/common.lua). */
  env?: Record<string, string>
}

/** The list request every reading scenario sends; the reference serves the matching 20 plants. */
export const LIST_LIMIT = 20
export const LIST_PATH = `/plants?limit=${LIST_LIMIT}`

export const SCENARIOS: readonly Scenario[] = [
  { name: 'get', description: `GET ${LIST_PATH} on the seeded account`, lua: 'get.lua', ids: 'none' },
  { name: 'post', description: 'POST /plants with fresh ids', lua: 'post.lua', ids: 'fresh' },
  {
    name: 'mix',
    description: `90% GET ${LIST_PATH}, 10% POST /plants with fresh ids`,
    lua: 'mix.lua',
    ids: 'fresh',
    env: { PLANTSTORE_BENCH_WRITE_EVERY: '10' },
  },
  {
    name: 'delete',
    description: 'DELETE /plants/{id} of existing plants, each id once',
    lua: 'delete.lua',
    ids: 'existing',
  },
]

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
