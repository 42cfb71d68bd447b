/**
 * Backups under write load (issue 27): a SQLite service's POST /plants throughput while `plantstore backup` copies
 * its store back to back, over without, in interleaved rounds on one service (the order flips every round). The
 * first backup has begun copying before wrk starts; the backups run as an operator's would, processes of their own
 * on any core. The target is at least 0.8.
 */
import { spawn } from 'node:child_process'
import { readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { bulkSeed } from './bulk-seed.js'
import { freshDatabase } from './databases.js'
import { catalogueEnv } from './plants.js'
import { median, spread } from './report-rows.js'
import type { RoundsContext } from './rounds.js'
import { ACCOUNT_NAMES, count } from './scenarios.js'
import { REPO_DIR, SERVICE_NODE_FLAGS, startService, type Server, type ServerContext } from './servers.js'
import { runWrk, type WrkResult } from './wrk.js'

const TARGET = 0.8
const LABEL = 'SQLite backup load'

/** `plantstore backup` (built, with the service's node flags) on every core; resolves with its wall time. */
function backupOnce(databaseUrl: string, file: string, cpus: string | undefined): Promise<number> {
  const args = [
    ...SERVICE_NODE_FLAGS,
    path.join(REPO_DIR, 'dist', 'cli', 'main.js'),
    'backup',
    file,
    '--database',
    databaseUrl,
  ]
  const [command, commandArgs] =
    cpus === undefined ? [process.execPath, args] : ['taskset', ['-c', cpus, process.execPath, ...args]]
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const child = spawn(command, commandArgs, { cwd: REPO_DIR, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => {
      rmSync(file, { force: true })
      if (code !== 0) reject(new Error(`plantstore backup exited with ${code}: ${stderr.trim()}`))
      else resolve((performance.now() - started) / 1000)
    })
  })
}

/** Backups back to back until `stop()` (which gives each one's span); `copying` once the first has begun to copy. */
function backupLoop(databaseUrl: string, dir: string, cpus: string | undefined) {
  let running = true
  const spans: Array<[number, number]> = []
  const loop = (async () => {
    try {
      for (let n = 1; running; n++) {
        const started = performance.now()
        await backupOnce(databaseUrl, path.join(dir, `backup-load-${n}.db`), cpus)
        spans.push([started, performance.now()])
      }
    } finally {
      running = false
    }
  })()
  const begun = () => readdirSync(dir).some((name) => name.startsWith('backup-load-') && name.endsWith('.tmp'))
  const copying = (async () => {
    while (running && !begun()) await new Promise((resolve) => setTimeout(resolve, 5))
  })()
  return {
    copying: Promise.race([copying, loop]),
    stop: async () => {
      running = false
      await loop
      return spans
    },
  }
}

async function post(server: Server, token: string, seconds: number, context: RoundsContext): Promise<WrkResult> {
  const result = await runWrk({
    ...{ url: server.url, lua: 'post.lua', seconds, connections: context.options.connections, cpu: context.loadCpu },
    env: {
      PLANTSTORE_BENCH_TOKEN: token,
      PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(),
      PLANTSTORE_BENCH_ID_START: String(context.blocks.take()),
    },
  })
  if (result.non2xx + result.socketErrors > 0)
    throw new Error(`${LABEL}: ${result.non2xx} non-2xx responses, ${result.socketErrors} socket errors`)
  return result
}

/** A measured run while backups follow one another: the backups overlapping it and the share of it they covered. */
async function withBackups(server: Server, token: string, databaseUrl: string, dir: string, context: RoundsContext) {
  // The harness runs pinned to the load core; the backups get every core back, as on a server machine.
  const cpus = context.loadCpu === undefined ? undefined : `0-${os.cpus().length - 1}`
  const backups = backupLoop(databaseUrl, dir, cpus)
  await backups.copying
  const from = performance.now()
  const wrk = await post(server, token, context.options.duration, context)
  const to = performance.now()
  const spans = (await backups.stop()).filter(([start, end]) => end > from && start < to)
  const covered = spans.reduce((sum, [start, end]) => sum + Math.min(end, to) - Math.max(start, from), 0) / (to - from)
  return { wrk, backupSeconds: spans.map(([start, end]) => (end - start) / 1000), covered }
}

type Round = { without: WrkResult; with: Awaited<ReturnType<typeof withBackups>> }

function section(plants: number, rounds: Round[], context: RoundsContext): string[] {
  const ratios = rounds.map((round) => round.with.wrk.rps / round.without.rps)
  const figures = (pick: (round: Round) => WrkResult) =>
    `${Math.round(median(rounds.map((r) => pick(r).rps)))} | ${median(rounds.map((r) => pick(r).p99Ms)).toFixed(2)} ms`
  const backups = rounds.flatMap((round) => round.with.backupSeconds)
  const { connections, duration } = context.options
  return [
    '## Backups under write load',
    '',
    `POST /plants with fresh ids (${connections} connections) on a SQLite service holding ${count(plants)} plants, ` +
      `while \`plantstore backup\` copies its store back to back for the whole run, vs without; ${rounds.length} ` +
      `interleaved rounds of ${duration} s (the order flips every round). The backups run as processes of their ` +
      'own on any core (bench/backup-load.ts).',
    '',
    '| run | req/s | p99 |',
    '| --- | ---: | ---: |',
    `| without a backup | ${figures((r) => r.without)} |`,
    `| during backups | ${figures((r) => r.with.wrk)} |`,
    '',
    `- req/s during backups over without, per round: ${spread(ratios)}; target ≥ ${TARGET}: ` +
      (median(ratios) >= TARGET ? 'met' : '**missed**'),
    `- backups: ${backups.length} overlapping the measured runs, ${median(backups).toFixed(1)} s each (median, ` +
      `process start to exit, check included); a backup process ran during ` +
      `${Math.round(100 * median(rounds.map((r) => r.with.covered)))}% of a measured run (median)`,
    '',
  ]
}

/** Seeds a SQLite store of `--large` plants, starts a service on it and measures; the report's section. */
export async function measureBackupLoad(context: RoundsContext, servers: ServerContext): Promise<string[]> {
  const { options, log } = context
  const plants = options.sizes.large
  const databaseUrl = await freshDatabase('SQLite', 'backup_load', servers, undefined)
  const [seeded] = await bulkSeed(databaseUrl, [{ name: ACCOUNT_NAMES.list, plants }])
  const token = seeded?.token ?? ''
  const server = await startService(LABEL, databaseUrl, token, servers)
  log(`backup-load: POST /plants on ${count(plants)} plants with and without backups running`)
  try {
    const rounds: Round[] = []
    for (let n = 1; n <= options.rounds; n++) {
      const round: Partial<Round> = {}
      for (const kind of n % 2 === 1 ? ['without', 'with'] : ['with', 'without']) {
        if (options.warmup > 0) await post(server, token, options.warmup, context)
        if (kind === 'without') round.without = await post(server, token, options.duration, context)
        else round.with = await withBackups(server, token, databaseUrl, servers.tmpDir, context)
      }
      const done = round as Round
      rounds.push(done)
      log(
        `  backup-load ${n}/${options.rounds}  without ${Math.round(done.without.rps)} req/s, during backups ` +
          `${Math.round(done.with.wrk.rps)} req/s (${(done.with.wrk.rps / done.without.rps).toFixed(2)}), ` +
          `${done.with.backupSeconds.length} backups`,
      )
    }
    return section(plants, rounds, context)
  } finally {
    await server.stop()
  }
}
