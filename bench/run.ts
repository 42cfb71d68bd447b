/**
 * `npm run bench`: the service against a bare node:http reference server, under wrk, in interleaved rounds.
 * See HELP in options.ts for the flags and bench/results.md for the latest figures.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Cleanup } from './cleanup.js'
import { IdBlocks, IdPool } from './id-pool.js'
import { detectPinning, machineSummary, pinSelf, requireWrk, wrkVersion, type Pinning } from './machine.js'
import { HELP, parseOptions, type BenchOptions } from './options.js'
import { listBody } from './plants.js'
import { redactUrl } from '../src/redact.js'
import { createBenchSchema, postgresVersion } from './postgres.js'
import { errorLines, markdownReport, REFERENCE, textTable, type Measurement } from './report.js'
import { runScenario, type RoundsContext, type Target } from './rounds.js'
import { LIST_PATH } from './scenarios.js'
import { getText, seedRange } from './seed.js'
import { REPO_DIR, startReference, startService, type ServerContext } from './servers.js'

const POSTGRES_URL = process.env.PLANTSTORE_BENCH_POSTGRES_URL

function log(line: string): void {
  process.stdout.write(line + '\n')
}

function newTarget(server: Target['server'], withPool: boolean): Target {
  return { server, pool: withPool ? new IdPool() : undefined, rates: new Map(), seededToDelete: 0 }
}

/** Reference, SQLite on a fresh file, and PostgreSQL in a fresh schema when configured; all on the servers' core. */
async function startTargets(context: ServerContext): Promise<Target[]> {
  const targets = [newTarget(await startReference(listBody(), context), false)]
  const sqliteFile = path.join(context.tmpDir, 'bench.db')
  targets.push(newTarget(await startService('SQLite', `sqlite:${sqliteFile}`, context), true))
  if (POSTGRES_URL !== undefined && POSTGRES_URL !== '') {
    const schema = await createBenchSchema(POSTGRES_URL)
    context.cleanup.add(`drop schema ${schema.name}`, schema.drop)
    log(`PostgreSQL: schema ${schema.name} at ${redactUrl(POSTGRES_URL)}`)
    targets.push(newTarget(await startService('PostgreSQL', schema.databaseUrl, context), true))
  }
  return targets
}

/**
 * Seeds plants 1..n into every service's account (the largest count any chosen scenario needs) and checks the
 * first page is byte for byte what the reference sends, so GETs compare like with like.
 */
async function seedServices(targets: Target[], options: BenchOptions, token: string): Promise<string[]> {
  const plants = Math.max(options.seed, ...options.scenarios.map((s) => s.plants ?? 0))
  const notes: string[] = []
  for (const target of targets.filter((t) => t.pool !== undefined)) {
    const rate = await seedRange(target.server.url, token, { start: 1, end: plants + 1 })
    target.rates.set('seed', rate)
    log(`seeded ${plants} plants into ${target.server.label} at ${Math.round(rate)}/s`)
    notes.push(
      `${target.server.label}: seeded ${plants} plants through the API at ${Math.round(rate)} POST/s (50 concurrent)`,
    )
    const body = await getText(target.server.url, token, LIST_PATH)
    if (body !== listBody()) throw new Error(`${target.server.label} lists other bytes than the reference:\n${body}`)
  }
  return notes
}

function commandLine(options: BenchOptions): string {
  const args = options.args.join(' ')
  const prefix = POSTGRES_URL ? `PLANTSTORE_BENCH_POSTGRES_URL=${redactUrl(POSTGRES_URL)} ` : ''
  if (process.env.npm_lifecycle_event === 'bench') return `${prefix}npm run bench${args ? ` -- ${args}` : ''}`
  return `${prefix}node --import tsx bench/run.ts ${args}`.trim()
}

function modeLine(options: BenchOptions): string {
  const kind = options.quick ? 'quick (smoke test, not a measurement)' : 'full'
  return (
    `${kind}: ${options.rounds} rounds; per server per scenario per round ${options.warmup} s warm-up then ` +
    `${options.duration} s measured; ${options.connections} connections, ${options.threads === 1 ? '1 wrk thread' : `${options.threads} wrk threads`}; ` +
    `${options.seed} plants in the listed account`
  )
}

function serviceLine(): string {
  const git = (args: string[]): string => execFileSync('git', args, { cwd: REPO_DIR, encoding: 'utf8' }).trim()
  const dirty = git(['status', '--porcelain', '--', 'src']) === '' ? '' : ' with uncommitted changes in src/'
  return (
    `commit ${git(['rev-parse', '--short', 'HEAD'])}${dirty}, built to dist/ and run with node; ` +
    `LOG_LEVEL=info with the logs sent to /dev/null; PLANTSTORE_RATE_LIMIT=0; DATABASE_POOL_SIZE=${process.env.DATABASE_POOL_SIZE || '10 (default)'}`
  )
}

async function softwareLine(): Promise<string> {
  const parts = [`Node ${process.version}`, wrkVersion()]
  if (POSTGRES_URL) {
    // Its processes run wherever the scheduler puts them: on the servers' core they count as "other".
    parts.push(`${await postgresVersion(POSTGRES_URL)} (same machine, not pinned, its memory not in peak RSS)`)
  }
  return parts.join(', ')
}

async function measure(options: BenchOptions, pinning: Pinning, cleanup: Cleanup): Promise<number> {
  const loadBefore = os.loadavg()[0] ?? 0
  const service = serviceLine() // at the start: the code measured, whatever is committed meanwhile
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-'))
  cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
  const token = randomBytes(32).toString('base64url')
  const targets = await startTargets({ token, cpu: pinning.serverCpu, tmpDir, cleanup })
  const notes = [
    `load average (1 min) before the servers started: ${loadBefore.toFixed(2)} on ${os.cpus().length} cores`,
    ...(await seedServices(targets, options, token)),
  ]
  const runs = options.scenarios.length * options.rounds * targets.length * (options.warmup + options.duration)
  log(
    `running ${options.scenarios.length} scenarios × ${options.rounds} rounds × ${targets.length} servers: ~${Math.ceil(runs / 60)} min`,
  )

  const context: RoundsContext = {
    options,
    token,
    serverCpu: pinning.serverCpu,
    loadCpu: pinning.loadCpu,
    blocks: new IdBlocks(),
    log,
  }
  const measurements: Measurement[] = []
  for (const scenario of options.scenarios) measurements.push(...(await runScenario(scenario, targets, context)))
  for (const target of targets.filter((t) => t.seededToDelete > 0)) {
    notes.push(
      `${target.server.label}: ${target.seededToDelete} plants seeded between delete runs (beyond what post and mix left)`,
    )
  }

  const report = {
    date: new Date(),
    command: commandLine(options),
    mode: modeLine(options),
    machine: machineSummary(),
    software: await softwareLine(),
    pinning: pinning.note,
    service,
    scenarios: options.scenarios,
    servers: targets.map((t) => t.server.label),
    measurements,
    notes,
  }
  writeFileSync(path.resolve(REPO_DIR, options.out), markdownReport(report))
  log(`\n${textTable(report)}\n\nwritten to ${options.out}`)
  return reportErrors(measurements)
}

/** Errors make the run fail (exit 1), loudly, after the report is written. */
function reportErrors(measurements: Measurement[]): number {
  const errors = errorLines(measurements)
  if (errors.length === 0) return 0
  process.stderr.write(
    `\nbench: !! ${errors.length} measured runs had errors:\n${errors.map((e) => `  ${e}\n`).join('')}`,
  )
  return 1
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (options === 'help') return log(HELP)
  requireWrk()
  const cleanup = new Cleanup()
  const pinning = detectPinning()
  pinSelf(pinning)
  log(`bench: ${pinning.note}; reference server = "${REFERENCE}"`)
  try {
    process.exitCode = await measure(options, pinning, cleanup)
  } finally {
    await cleanup.run()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = 1
})
