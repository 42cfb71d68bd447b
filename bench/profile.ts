/**
 * `npm run bench:profile`: runs the service under `node --cpu-prof` while wrk loads it with one scenario, then
 * says where the CPU time went per request, by part of the service, and leaves the profile for a flame graph.
 *
 *   npm run bench:profile -- [--scenario get|post|mix] [--seconds 10] [--postgres] [--node PATH] [--out bench/profiles]
 *
 * --node runs the service on another Node binary (better-sqlite3 built for it as `npm run bench -- --node` does).
 *
 * The .cpuprofile opens as a flame chart in Chrome DevTools (Performance, "Load profile") or VS Code; the
 * .folded file (one stack per line) is what flamegraph.pl, inferno or speedscope turn into a flame graph.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { bulkSeed } from './bulk-seed.js'
import { Cleanup } from './cleanup.js'
import { detectPinning, pinSelf, requireWrk } from './machine.js'
import { freshDatabase } from './databases.js'
import { catalogueEnv } from './plants.js'
import { summariseProfile } from './profile-summary.js'
import { prepareRuntimes } from './runtimes.js'
import { REPO_DIR, startService } from './servers.js'
import { SCENARIOS, type Scenario } from './scenarios.js'
import { runWrk } from './wrk.js'

// The benchmark's own scenarios that run against one account of the service; fresh-id writes get a block of
// ids far above the seeded ones.
const PROFILED = SCENARIOS.filter((scenario) => ['get', 'post', 'mix'].includes(scenario.name))
const FRESH_IDS = { PLANTSTORE_BENCH_ID_START: '1000000000', PLANTSTORE_BENCH_ID_STRIDE: '1000000000' }

function scriptFor(scenario: Scenario): { lua: string; env: Record<string, string> } {
  return { lua: scenario.lua, env: { ...scenario.env, ...(scenario.ids === 'fresh' ? FRESH_IDS : {}) } }
}

function options() {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string', default: 'get' },
      seconds: { type: 'string', default: '10' },
      postgres: { type: 'boolean', default: false },
      node: { type: 'string' },
      out: { type: 'string', default: 'bench/profiles' },
    },
  })
  const scenario = PROFILED.find((candidate) => candidate.name === values.scenario)
  if (scenario === undefined) throw new Error(`--scenario: one of ${PROFILED.map((s) => s.name).join(', ')}`)
  const script = scriptFor(scenario)
  const seconds = Number(values.seconds)
  if (!Number.isInteger(seconds) || seconds < 1) throw new Error('--seconds: a positive integer')
  const postgresUrl = process.env.PLANTSTORE_BENCH_POSTGRES_URL
  if (values.postgres && !postgresUrl) throw new Error('--postgres needs PLANTSTORE_BENCH_POSTGRES_URL')
  return { ...values, script, seconds, postgresUrl: values.postgres ? postgresUrl : undefined }
}

/** Requests the service answered, from its own counter (warm-up included, like the profile). */
function requestsServed(url: string): Promise<number> {
  // The service inherits this environment, PLANTSTORE_METRICS_TOKEN included.
  const token = process.env.PLANTSTORE_METRICS_TOKEN
  const headers = token ? { authorization: `Bearer ${token}` } : {}
  return new Promise((resolve, reject) => {
    request(`${url}/metrics`, { headers }, (res) => {
      let text = ''
      res.on('data', (chunk: Buffer) => (text += chunk.toString()))
      res.on('end', () => {
        const counts = text.match(/^plantstore_http_requests_total\{.*\} \d+$/gm) ?? []
        const total = counts.reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0)
        if (res.statusCode !== 200 || total === 0)
          reject(new Error(`GET /metrics: ${res.statusCode}, no request count`))
        else resolve(total)
      })
    })
      .once('error', reject)
      .end()
  })
}

async function main(): Promise<void> {
  const opts = options()
  requireWrk()
  const cleanup = new Cleanup()
  const pinning = detectPinning()
  pinSelf(pinning)
  try {
    const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-profile-'))
    cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
    const context = { cpu: pinning.serverCpu, tmpDir, cleanup }
    const backend = opts.postgresUrl === undefined ? 'SQLite' : 'PostgreSQL'
    const databaseUrl = await freshDatabase(backend, 'profile', context, opts.postgresUrl)
    const profileDir = path.join(tmpDir, 'profile')
    // As npm run bench does: schema and token through the CLI, 1,000 plants with SQL, before the service starts.
    const [account] = await bulkSeed(databaseUrl, [{ name: 'bench-list', plants: 1000 }])
    const token = account?.token ?? ''
    const runtimes = await prepareRuntimes(opts.node === undefined ? [] : [opts.node], context, (line) =>
      process.stdout.write(`${line}\n`),
    )
    const runtime = runtimes.at(-1)
    process.stdout.write(`profiling the service on Node ${runtime?.version}\n`)
    const server = await startService('service', databaseUrl, token, context, {
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
      runtime,
    })
    const load = { url: server.url, lua: opts.script.lua, connections: 50, threads: 1, cpu: pinning.loadCpu }
    const env = { PLANTSTORE_BENCH_TOKEN: token, PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(), ...opts.script.env }
    await runWrk({ ...load, seconds: 2, env })
    const measured = await runWrk({ ...load, seconds: opts.seconds, env })
    const requests = await requestsServed(server.url)
    await server.stop() // a clean exit writes the profile
    const [file] = readdirSync(profileDir).filter((name) => name.endsWith('.cpuprofile'))
    if (file === undefined) throw new Error('the service wrote no .cpuprofile')
    report(path.join(profileDir, file), opts, requests, measured.rps, runtime?.version ?? process.version)
  } finally {
    await cleanup.run()
  }
}

function report(file: string, opts: ReturnType<typeof options>, requests: number, rps: number, version: string): void {
  const nodeMajor = version.slice(1).split('.')[0] ?? ''
  const summary = summariseProfile(file)
  const out = path.resolve(REPO_DIR, opts.out)
  mkdirSync(out, { recursive: true })
  const base = `${opts.scenario}-${opts.postgresUrl ? 'postgres' : 'sqlite'}-node${nodeMajor}`
  copyFileSync(file, path.join(out, `${base}.cpuprofile`))
  writeFileSync(path.join(out, `${base}.folded`), summary.folded)
  const lines = [
    `${opts.scenario} on ${opts.postgresUrl ? 'PostgreSQL' : 'SQLite'}, Node ${version}: ${Math.round(rps)} req/s under the profiler; ` +
      `${requests} requests served in ${(summary.totalUs / 1e6).toFixed(1)} s of profile`,
    '',
    '| part | share of the time | µs per request |',
    '| --- | ---: | ---: |',
    ...summary.parts.map(
      ({ part, us }) => `| ${part} | ${((100 * us) / summary.totalUs).toFixed(1)}% | ${(us / requests).toFixed(1)} |`,
    ),
    `| **all** | 100% | ${(summary.totalUs / requests).toFixed(1)} |`,
  ]
  writeFileSync(path.join(out, `${base}.md`), lines.join('\n') + '\n')
  process.stdout.write(`${lines.join('\n')}\n\nprofile, folded stacks and this table in ${opts.out}/${base}.*\n`)
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:profile: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exitCode = 1
})
