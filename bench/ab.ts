/**
 * `npm run bench:ab`: interleaved A/B runs of builds of the service, to measure one change at a time.
 *
 *   npm run bench:ab -- snapshot NAME          build this checkout and keep its dist/ as variant NAME
 *   npm run bench:ab -- run [--rounds 6] [--seconds 5] [--scenario get|post] [--postgres] VARIANT...
 *
 * A VARIANT is a snapshot's NAME, optionally with settings for its process (`NAME@LOG_LEVEL=warn`, several
 * separated by commas; it runs with the node flags of the snapshot's bin/plantstore.js), or `plain` for the plain handler (bench/plain-server.ts). Each gets a SQLite database of
 * its own (with --postgres, a schema of its own at PLANTSTORE_BENCH_POSTGRES_URL), seeded alike (10,000 plants); then every round runs wrk against each in turn (the order flips every
 * round), with the service's node flags, servers pinned as `npm run bench` pins them. It prints, per variant, the
 * medians of req/s, of the server's CPU time per request (less noisy than req/s on a shared machine), of p99 and the
 * highest peak RSS, and the median of the per-round req/s ratios to the first variant and to `plain`. Snapshots live
 * in node_modules/.cache/plantstore-bench/ab/.
 */
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { bulkSeed } from './bulk-seed.js'
import { Cleanup } from './cleanup.js'
import { detectPinning, pinSelf, requireWrk } from './machine.js'
import { freshDatabase, type Backend } from './databases.js'
import { catalogueEnv } from './plants.js'
import { PeakRss } from './rss.js'
import { prepareRuntimes } from './runtimes.js'
import { nodeFlagsOf, REPO_DIR, startPlain, startService, type Server, type ServerContext } from './servers.js'
import { max, median, min } from './stats.js'
import { runWrk } from './wrk.js'

const SNAPSHOTS = path.join(REPO_DIR, 'node_modules', '.cache', 'plantstore-bench', 'ab')
const PLANTS = 10_000
const FRESH_IDS_PER_RUN = 1_000_000

function snapshot(name: string): void {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`snapshot name: letters, digits, - and _ only, got "${name}"`)
  execFileSync('npm', ['run', 'build'], { cwd: REPO_DIR, stdio: 'inherit' })
  const dir = path.join(SNAPSHOTS, name)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  cpSync(path.join(REPO_DIR, 'dist'), path.join(dir, 'dist'), { recursive: true })
  cpSync(path.join(REPO_DIR, 'package.json'), path.join(dir, 'package.json'))
  cpSync(path.join(REPO_DIR, 'bin'), path.join(dir, 'bin'), { recursive: true })
  symlinkSync(path.join(REPO_DIR, 'node_modules'), path.join(dir, 'node_modules'))
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_DIR, encoding: 'utf8' }).trim()
  const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: REPO_DIR, encoding: 'utf8' })
  process.stdout.write(`variant ${name}: commit ${commit}${dirty === '' ? '' : ' with uncommitted changes in src/'}\n`)
}

interface Variant {
  label: string
  server: Server
  token: string
  runs: Array<{ rps: number; cpuUs: number; p99Ms: number; rssMB: number }>
}

/** "name@A=1,B=2" → the snapshot's name and its process settings. */
function parseVariant(text: string): { name: string; env: Record<string, string> } {
  const [name = '', settings] = text.split('@')
  const env: Record<string, string> = {}
  for (const pair of settings?.split(',') ?? []) {
    const at = pair.indexOf('=')
    if (at < 1) throw new Error(`variant "${text}": settings are NAME=value`)
    env[pair.slice(0, at)] = pair.slice(at + 1)
  }
  return { name, env }
}

/** CPU time of a process, all threads, in µs (utime + stime, 100 jiffies a second). */
function cpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

async function startVariant(text: string, index: number, context: ServerContext, backend: Backend): Promise<Variant> {
  const databaseUrl = await freshDatabase(
    backend,
    `ab_variant_${index}`,
    context,
    process.env.PLANTSTORE_BENCH_POSTGRES_URL,
  )
  const [account] = await bulkSeed(databaseUrl, [{ name: 'listed', plants: PLANTS }])
  const token = account?.token ?? ''
  const { name, env } = parseVariant(text)
  if (name === 'plain') {
    const [runtime] = await prepareRuntimes(
      [],
      { ...context, tmpDir: mkdtempSync(path.join(context.tmpDir, 'p-')) },
      () => {},
    )
    if (runtime === undefined) throw new Error('no runtime')
    return {
      label: text,
      server: await startPlain(text, databaseUrl, 'listed', token, context, runtime),
      token,
      runs: [],
    }
  }
  const main = path.join(SNAPSHOTS, name, 'dist', 'cli', 'main.js')
  if (!existsSync(main)) throw new Error(`no snapshot "${name}": npm run bench:ab -- snapshot ${name}`)
  const runtime = { node: process.execPath, version: process.version, tag: '', serviceMain: main, plainServer: '' }
  // The snapshot's own node flags: flags on node's command line win over NODE_OPTIONS, so to compare flags,
  // snapshot builds whose bin/plantstore.js differ.
  const nodeFlags = nodeFlagsOf(path.join(SNAPSHOTS, name, 'bin', 'plantstore.js'))
  const server = await startService(text, databaseUrl, token, context, { env, runtime, nodeFlags })
  return { label: text, server, token, runs: [] }
}

async function measure(variant: Variant, scenario: string, seconds: number, idStart: number, loadCpu?: number) {
  const env = {
    PLANTSTORE_BENCH_TOKEN: variant.token,
    PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(),
    PLANTSTORE_BENCH_ID_START: String(idStart),
    PLANTSTORE_BENCH_ID_STRIDE: String(FRESH_IDS_PER_RUN),
  }
  const load = { url: variant.server.url, lua: `${scenario}.lua`, connections: 50, threads: 1, cpu: loadCpu, env }
  await runWrk({ ...load, seconds: 1, env: { ...env, PLANTSTORE_BENCH_ID_START: String(idStart + FRESH_IDS_PER_RUN) } })
  const rss = new PeakRss(variant.server.pid)
  rss.start()
  const before = cpuUs(variant.server.pid)
  const wrk = await runWrk({ ...load, seconds })
  const used = cpuUs(variant.server.pid) - before
  const peak = rss.stop()
  if (wrk.non2xx > 0 || wrk.socketErrors > 0)
    throw new Error(`${variant.label}: ${wrk.non2xx} errors, ${wrk.socketErrors} socket errors`)
  const run = { rps: wrk.rps, cpuUs: used / wrk.requests, p99Ms: wrk.p99Ms, rssMB: peak / 1e6 }
  variant.runs.push(run)
  return run
}

function report(variants: Variant[]): void {
  const [first] = variants
  const plain = variants.find((variant) => variant.label === 'plain')
  const ratios = (variant: Variant, base: Variant | undefined) => {
    if (base === undefined) return '–'
    const each = variant.runs.map((run, i) => run.rps / (base.runs[i]?.rps ?? Number.NaN))
    return `${median(each).toFixed(3)} (${min(each).toFixed(2)}–${max(each).toFixed(2)})`
  }
  process.stdout.write('\nvariant | req/s | CPU µs/request | p99 ms | peak RSS MB | req/s vs first | req/s vs plain\n')
  for (const variant of variants) {
    const runs = variant.runs
    const cells = [
      variant.label,
      median(runs.map((r) => r.rps)).toFixed(0),
      median(runs.map((r) => r.cpuUs)).toFixed(1),
      median(runs.map((r) => r.p99Ms)).toFixed(1),
      max(runs.map((r) => r.rssMB)).toFixed(0),
      ratios(variant, first),
      ratios(variant, plain),
    ]
    process.stdout.write(`${cells.join(' | ')}\n`)
  }
}

async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      rounds: { type: 'string', default: '6' },
      seconds: { type: 'string', default: '5' },
      scenario: { type: 'string', default: 'get' },
      postgres: { type: 'boolean', default: false },
    },
  })
  if (!['get', 'post'].includes(values.scenario)) throw new Error('--scenario: get or post')
  if (positionals.length === 0) throw new Error('name at least one variant')
  const backend: Backend = values.postgres ? 'PostgreSQL' : 'SQLite'
  requireWrk()
  const pinning = detectPinning()
  pinSelf(pinning)
  const cleanup = new Cleanup()
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-ab-'))
  cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
  try {
    const context: ServerContext = { cpu: pinning.serverCpu, tmpDir, cleanup }
    const variants: Variant[] = []
    for (const [i, text] of positionals.entries()) variants.push(await startVariant(text, i, context, backend))
    let idStart = 1_000_000
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
        const r = await measure(variant, values.scenario, Number(values.seconds), idStart, pinning.loadCpu)
        idStart += 2 * FRESH_IDS_PER_RUN
        const line = `round ${round + 1} ${variant.label}: ${r.rps.toFixed(0)} req/s, ${r.cpuUs.toFixed(1)} µs/request, p99 ${r.p99Ms.toFixed(1)} ms, ${r.rssMB.toFixed(0)} MB`
        process.stdout.write(`${line}\n`)
      }
    }
    report(variants)
  } finally {
    await cleanup.run()
  }
}

const [command, ...rest] = process.argv.slice(2)
const main =
  command === 'snapshot' ? async () => snapshot(rest[0] ?? '') : command === 'run' ? () => run(rest) : undefined
if (main === undefined) {
  process.stderr.write(
    'usage: npm run bench:ab -- snapshot NAME | run [--rounds N] [--seconds S] [--scenario get|post] [--postgres] VARIANT...\n',
  )
  process.exitCode = 2
} else {
  main().catch((err: unknown) => {
    process.stderr.write(`bench:ab: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exitCode = 1
  })
}
