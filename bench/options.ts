import { parseArgs } from 'node:util'
import { BACKLOG_SUBSCRIPTIONS, SCENARIOS, selectScenarios, type BenchSizes, type Scenario } from './scenarios.js'

export interface BenchOptions {
  quick: boolean
  rounds: number
  /** Measured seconds per server per round; the size scenarios measure sizeDuration per account. */
  duration: number
  sizeDuration: number
  /** Unmeasured seconds before each measured run; 0 for none. */
  warmup: number
  connections: number
  sizes: BenchSizes
  scenarios: Scenario[]
  /** POST throughput during backups too (bench/backup-load.ts): scenario name `backup-load`. */
  backupLoad: boolean
  /** Other node binaries (--node) and other checkouts' builds (--service) run beside the harness's. */
  nodes: string[]
  services: string[]
  out: string
  /** The arguments as given, for the report's command line. */
  args: string[]
}

const BACKUP_LOAD = 'backup-load'

export const HELP = `Usage: npm run bench -- [options]   (the method: bench/README.md)

Benchmarks the service (SQLite; PostgreSQL too when PLANTSTORE_BENCH_POSTGRES_URL is set) against a bare
node:http reference server and a plain Fastify handler per backend with wrk, in interleaved rounds, and writes
the report as Markdown.

  --quick            CI smoke run, not a measurement: 2 rounds of 1 s runs without warm-up, accounts of 10,000
                     (listed), 1,000 (small) and 100,000 (large) plants, a backlog of 1,000
  --rounds N         rounds (default 6)
  --duration S       measured seconds per server per round (default 10; the size scenarios half, per account)
  --warmup S         warm-up seconds before each measured run, 0 for none (default 1)
  --connections N    wrk connections (default 50)
  --seed N           plants in the listed account, read and written by get, post, mix, delete (default 100000)
  --small N          plants in the small account of the size scenarios (default 1000)
  --large N          plants in the large account of the size scenarios (default 1000000)
  --backlog N        events queued for each of the backlog account's ${BACKLOG_SUBSCRIPTIONS} subscriptions (default 50000)
  --scenarios LIST   comma-separated (default all), from: ${SCENARIOS.map((s) => s.name).join(', ')}, ${BACKUP_LOAD}
  --node PATH        run the services and plain handlers on this node binary too (repeatable)
  --service DIR      run the service built in the checkout DIR too, labelled with its short commit (repeatable)
  --out FILE         report file (default bench/results.md)`

/** Keyset pages need a page after the first and before the last one: 2 pages and a plant at least. */
const MIN_PLANTS = 41

function integer(flag: string, value: string | undefined, fallback: number, least: number): number {
  if (value === undefined) return fallback
  if (!/^[0-9]+$/.test(value) || Number(value) < least)
    throw new Error(`--${flag}: expected an integer of at least ${least}, got "${value}"`)
  return Number(value)
}

/** Reads the command line; explicit flags win over --quick's presets. */
export function parseOptions(args: string[]): BenchOptions | 'help' {
  const text = { type: 'string' } as const
  const many = { type: 'string', multiple: true } as const
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      ...{ quick: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
      ...{ rounds: text, duration: text, warmup: text, connections: text, seed: text, small: text, large: text },
      ...{ backlog: text, scenarios: text, node: many, service: many, out: text },
    },
  })
  if (values.help) return 'help'
  const quick = values.quick
  const duration = integer('duration', values.duration, quick ? 1 : 10, 1)
  const sizes = {
    list: integer('seed', values.seed, quick ? 10_000 : 100_000, MIN_PLANTS),
    small: integer('small', values.small, 1000, MIN_PLANTS),
    large: integer('large', values.large, quick ? 100_000 : 1_000_000, MIN_PLANTS),
    backlog: integer('backlog', values.backlog, quick ? 1000 : 50_000, 1),
  }
  if (sizes.large < sizes.small) throw new Error('--large: must be at least --small')
  const names = (values.scenarios ?? [...SCENARIOS.map((s) => s.name), BACKUP_LOAD].join(',')).split(',')
  return {
    quick,
    rounds: integer('rounds', values.rounds, quick ? 2 : 6, 1),
    duration,
    sizeDuration: Math.ceil(duration / 2),
    warmup: integer('warmup', values.warmup, quick ? 0 : 1, 0),
    connections: integer('connections', values.connections, 50, 1),
    sizes,
    scenarios: selectScenarios(names.filter((name) => name.trim() !== BACKUP_LOAD).join(',')),
    backupLoad: names.some((name) => name.trim() === BACKUP_LOAD),
    nodes: values.node ?? [],
    services: values.service ?? [],
    out: values.out ?? 'bench/results.md',
    args,
  }
}
