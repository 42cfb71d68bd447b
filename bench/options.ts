import { parseArgs } from 'node:util'
import { BACKLOG_SUBSCRIPTIONS, SCENARIOS, selectScenarios, type BenchSizes, type Scenario } from './scenarios.js'

export interface BenchOptions {
  quick: boolean
  rounds: number
  /** Measured seconds per server per round (reference scenarios; size scenarios run sizeDuration per account). */
  duration: number
  /** Measured seconds per account per service per round in the size scenarios. */
  sizeDuration: number
  /** Unmeasured seconds before each measured run (wrk takes whole seconds); 0 for none. */
  warmup: number
  connections: number
  /** wrk threads: 1 suits a load generator pinned to one core. */
  threads: number
  /** Plants in each account (ids 1..n), and the backlog scenarios' events queued per subscription. */
  sizes: BenchSizes
  scenarios: Scenario[]
  /** Measure POST throughput during backups too (bench/backup-load.ts): scenario name \`backup-load\`. */
  backupLoad: boolean
  /** Other node binaries the services and plain handlers run on too (--node). */
  nodes: string[]
  /** Other checkouts whose built services run beside this one's (--service). */
  services: string[]
  out: string
  /** The arguments as given, for the report's command line. */
  args: string[]
}

/** Not a wrk scenario of SCENARIOS: bench/backup-load.ts runs it, on a service of its own. */
const BACKUP_LOAD = 'backup-load'

export const HELP = `Usage: npm run bench -- [options]

Benchmarks the service (SQLite; PostgreSQL too when PLANTSTORE_BENCH_POSTGRES_URL is set) against a bare
node:http reference server and a plain Fastify handler per backend (bench/plain-server.ts) with wrk, in
interleaved rounds, and writes the results as Markdown. Servers run on the first node on PATH. The databases
are seeded before the servers start: schema and tokens with the service's CLI, plants in bulk with SQL.
The backlog scenarios run on twin services per backend instead, seeded alike but for another account's queued
webhook deliveries, which the service delivers to a slow receiver on loopback while the listed account is
measured; the report compares the twins and gives the dispatcher's claim time per call from /metrics.

  --quick            CI smoke run, not a measurement (75 s or so): 2 rounds of 1 s runs without warm-up,
                     accounts of 10,000 (listed), 1,000 (small) and 100,000 (large) plants, a backlog of 1,000
  --rounds N         rounds (default 6)
  --duration S       measured seconds per server per round (default 10); the size scenarios measure half as
                     long per account (rounded up), as they make two runs per service per round
  --warmup S         warm-up seconds before each measured run, 0 for none (default 1)
  --connections N    wrk connections (default 50)
  --threads N        wrk threads (default 1)
  --seed N           plants in the listed account, read and written by get, post, mix, delete (default 100000)
  --small N          plants in the small account of the size scenarios (default 1000)
  --large N          plants in the large account of the size scenarios (default 1000000)
  --backlog N        backlog scenarios: events queued for each of the other account's ${BACKLOG_SUBSCRIPTIONS} subscriptions, one
                     per plant it holds (default 50000: 500,000 queued deliveries)
  --scenarios LIST   comma-separated (default all), from:
                     ${SCENARIOS.map((s) => s.name).join(', ')}, ${BACKUP_LOAD}
                     (${BACKUP_LOAD}: POST throughput on --large plants while plantstore backup runs)
  --node PATH        run the services and plain handlers on this node binary too, side by side, labelled with
                     its version (repeatable); better-sqlite3 is built for it once, against the headers its
                     distribution ships in bin/../include/node (bench/README.md)
  --service DIR      run the service built in the checkout DIR (its dist/, node_modules and node flags) too,
                     beside this one's in the same rounds, labelled with DIR's short commit (repeatable)
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
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      threads: { type: 'string' },
      seed: { type: 'string' },
      small: { type: 'string' },
      large: { type: 'string' },
      backlog: { type: 'string' },
      scenarios: { type: 'string' },
      node: { type: 'string', multiple: true },
      service: { type: 'string', multiple: true },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
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
  const names = (values.scenarios ?? [...SCENARIOS.map((s) => s.name), BACKUP_LOAD].join(','))
    .split(',')
    .map((n) => n.trim())
  return {
    quick,
    rounds: integer('rounds', values.rounds, quick ? 2 : 6, 1),
    duration,
    sizeDuration: Math.ceil(duration / 2),
    warmup: integer('warmup', values.warmup, quick ? 0 : 1, 0),
    connections: integer('connections', values.connections, 50, 1),
    threads: integer('threads', values.threads, 1, 1),
    sizes,
    scenarios: selectScenarios(names.filter((name) => name !== BACKUP_LOAD).join(',')),
    backupLoad: names.includes(BACKUP_LOAD),
    nodes: values.node ?? [],
    services: values.service ?? [],
    out: values.out ?? 'bench/results.md',
    args,
  }
}
