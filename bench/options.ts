import { parseArgs } from 'node:util'
import { BACKLOG_SUBSCRIPTIONS, SCENARIOS } from './scenarios.js'

export type BenchOptions = Exclude<ReturnType<typeof parseOptions>, 'help'>

const NAMES = SCENARIOS.map((s) => s.name)

export const HELP = `Usage: npm run bench -- [options]   (the method: bench/README.md)

  --quick            CI smoke run, not a measurement: 2 rounds of 1 s runs without warm-up, accounts of 10,000
                     (listed), 1,000 (small) and 100,000 (large) plants, a backlog of 1,000
  --rounds N         rounds (default 6)
  --duration S       measured seconds per server per round (default 10; the size scenarios half, per account)
  --warmup S         warm-up seconds before each measured run, 0 for none (default 1)
  --connections N    wrk connections (default 50)
  --seed N           plants in the listed account, read and written by get, post, mix, delete (default 100000)
  --small N          plants in the small account of the size scenarios (default 1000)
  --large N          plants in the large account of the size scenarios and backup-load (default 1000000)
  --backlog N        events queued for each of the backlog account's ${BACKLOG_SUBSCRIPTIONS} subscriptions (default 50000)
  --scenarios LIST   comma-separated (default all), from: ${NAMES.join(', ')}
  --node PATH        run the services and plain handlers on this node binary too (repeatable)
  --out FILE         report file (default bench/results.md)`

/** Keyset pages need a page after the first and before the last one: 2 pages and a plant at least. */
const MIN_PLANTS = 41

/** Reads the command line; explicit flags win over --quick's presets. */
export function parseOptions(args: string[]) {
  const text = { type: 'string' } as const
  const numbers = ['rounds', 'duration', 'warmup', 'connections', 'seed', 'small', 'large', 'backlog'] as const
  const { values } = parseArgs({
    args,
    options: {
      ...Object.fromEntries(numbers.map((name) => [name, text])),
      ...{ quick: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
      ...{ scenarios: text, node: { type: 'string', multiple: true }, out: text },
    },
  })
  if (values.help) return 'help' as const
  const integer = (flag: (typeof numbers)[number], full: number, smoke: number, least: number): number => {
    const value = (values as Record<string, unknown>)[flag] as string | undefined
    if (value === undefined) return values.quick ? smoke : full
    if (!/^[0-9]+$/.test(value) || Number(value) < least)
      throw new Error(`--${flag}: expected an integer of at least ${least}, got "${value}"`)
    return Number(value)
  }
  const duration = integer('duration', 10, 1, 1)
  const sizes = {
    list: integer('seed', 100_000, 10_000, MIN_PLANTS),
    small: integer('small', 1000, 1000, MIN_PLANTS),
    large: integer('large', 1_000_000, 100_000, MIN_PLANTS),
    backlog: integer('backlog', 50_000, 1000, 1),
  }
  if (sizes.large < sizes.small) throw new Error('--large: must be at least --small')
  const names = (values.scenarios ?? NAMES.join(',')).split(',').map((name) => name.trim())
  const unknown = names.find((name) => name !== '' && !NAMES.includes(name))
  if (unknown !== undefined) throw new Error(`--scenarios: unknown scenario "${unknown}"; known: ${NAMES.join(', ')}`)
  return {
    quick: values.quick,
    rounds: integer('rounds', 6, 2, 1),
    duration,
    sizeDuration: Math.ceil(duration / 2),
    warmup: integer('warmup', 1, 0, 0),
    connections: integer('connections', 50, 50, 1),
    sizes,
    scenarios: SCENARIOS.filter((scenario) => names.includes(scenario.name)),
    nodes: values.node ?? [],
    out: values.out ?? 'bench/results.md',
    args,
  }
}
