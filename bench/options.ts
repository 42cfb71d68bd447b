import { parseArgs } from 'node:util'
import { SCENARIOS, selectScenarios, type Scenario } from './scenarios.js'

export interface BenchOptions {
  quick: boolean
  rounds: number
  /** Measured seconds per server per round. */
  duration: number
  /** Unmeasured seconds before each measured run (wrk takes whole seconds). */
  warmup: number
  connections: number
  /** wrk threads: 1 suits a load generator pinned to one core. */
  threads: number
  /** Plants seeded into the listed account. */
  seed: number
  scenarios: Scenario[]
  out: string
  /** The arguments as given, for the report's command line. */
  args: string[]
}

export const HELP = `Usage: npm run bench -- [options]

Benchmarks the service (SQLite; PostgreSQL too when PLANTSTORE_BENCH_POSTGRES_URL is set) against a bare
node:http reference server with wrk, in interleaved rounds, and writes the results as Markdown.

  --quick            CI smoke run, not a measurement: 2 rounds of 1 s runs, 1,000 seeded plants (under a minute)
  --rounds N         rounds (default 6)
  --duration S       measured seconds per server per round (default 10)
  --warmup S         warm-up seconds before each measured run (default 1)
  --connections N    wrk connections (default 50)
  --threads N        wrk threads (default 1)
  --seed N           plants in the listed account (default 10000)
  --scenarios LIST   comma-separated, from: ${SCENARIOS.map((s) => s.name).join(', ')} (default all)
  --out FILE         report file (default bench/results.md)`

function positiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!/^[0-9]+$/.test(value) || Number(value) < 1)
    throw new Error(`--${flag}: expected a positive integer, got "${value}"`)
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
      scenarios: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
  if (values.help) return 'help'
  const quick = values.quick
  return {
    quick,
    rounds: positiveInt('rounds', values.rounds, quick ? 2 : 6),
    duration: positiveInt('duration', values.duration, quick ? 1 : 10),
    warmup: positiveInt('warmup', values.warmup, 1),
    connections: positiveInt('connections', values.connections, 50),
    threads: positiveInt('threads', values.threads, 1),
    seed: positiveInt('seed', values.seed, quick ? 1000 : 10_000),
    scenarios: selectScenarios(values.scenarios ?? SCENARIOS.map((s) => s.name).join(',')),
    out: values.out ?? 'bench/results.md',
    args,
  }
}
