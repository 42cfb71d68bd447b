/**
 * Backups under write load (issue 27): a SQLite service's POST /plants throughput while `plantstore backup` copies
 * its store, over without, in interleaved rounds on one service (the order flips every round), so drift of a noisy
 * machine hits both alike. During a "with" run backups follow one another for the whole run: the first has begun
 * copying (its temporary file exists) before wrk starts, and the next starts when one ends. The backups run as an
 * operator's would, a process of their own, on any core (the servers' too); the target is at least 0.8.
 */
import { spawn } from 'node:child_process'
import { readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { bulkSeed } from './bulk-seed.js'
import { freshDatabase } from './databases.js'
import { BLOCK_SIZE, type IdBlocks } from './id-pool.js'
import type { BenchOptions } from './options.js'
import { catalogueEnv } from './plants.js'
import { ACCOUNT_NAMES, count } from './scenarios.js'
import { REPO_DIR, SERVICE_NODE_FLAGS, startService, type Server, type ServerContext } from './servers.js'
import { max, median, min } from './stats.js'
import { runWrk, type WrkResult } from './wrk.js'

export const BACKUP_LOAD_TARGET = 0.8

/** What the harness lends the measurement: its CPUs, fresh id blocks and its log. */
export interface BackupLoadContext {
  options: BenchOptions
  loadCpu: number | undefined
  blocks: IdBlocks
  log: (line: string) => void
}

interface Round {
  without: WrkResult
  with: WrkResult
  /** Wall time of each backup that overlapped the measured run, and how much of the run a copy was running. */
  backupSeconds: number[]
  covered: number
}

const LABEL = 'SQLite backup load'

/** Runs `plantstore backup` (built, with the service's node flags) on any core; resolves with its wall time. */
function backupOnce(databaseUrl: string, target: string, cpus: string | undefined): Promise<number> {
  const args = [...SERVICE_NODE_FLAGS, path.join(REPO_DIR, 'dist', 'cli', 'main.js'), 'backup', target]
  const [command, commandArgs] =
    cpus === undefined ? [process.execPath, args] : ['taskset', ['-c', cpus, process.execPath, ...args]]
  const started = performance.now()
  return new Promise((resolve, reject) => {
    // The harness runs pinned to the load core; the backup is given every core back, as on a server machine.
    const child = spawn(command, [...commandArgs, '--database', databaseUrl], {
      cwd: REPO_DIR,
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => {
      rmSync(target, { force: true })
      if (code !== 0) reject(new Error(`plantstore backup exited with ${code}: ${stderr.trim()}`))
      else resolve((performance.now() - started) / 1000)
    })
  })
}

/** Backups back to back until `stop()`; `copying` resolves once the first has begun to copy. */
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
  const copying = (async () => {
    const begun = () => readdirSync(dir).some((name) => name.startsWith('backup-load-') && name.endsWith('.tmp'))
    while (running && !begun()) await new Promise((resolve) => setTimeout(resolve, 5))
  })()
  return {
    copying: Promise.race([copying, loop]),
    async stop(): Promise<Array<[number, number]>> {
      running = false
      await loop
      return spans
    },
  }
}

async function post(server: Server, token: string, seconds: number, context: BackupLoadContext): Promise<WrkResult> {
  const { connections, threads } = context.options
  const result = await runWrk({
    url: server.url,
    lua: 'post.lua',
    seconds,
    connections,
    threads,
    cpu: context.loadCpu,
    env: {
      PLANTSTORE_BENCH_TOKEN: token,
      PLANTSTORE_BENCH_CATALOGUE: catalogueEnv(),
      PLANTSTORE_BENCH_ID_START: String(context.blocks.take()),
      PLANTSTORE_BENCH_ID_STRIDE: String(Math.floor(BLOCK_SIZE / threads)),
    },
  })
  if (result.non2xx + result.socketErrors > 0)
    throw new Error(`${LABEL}: ${result.non2xx} non-2xx responses, ${result.socketErrors} socket errors`)
  return result
}

async function withBackups(
  server: Server,
  token: string,
  databaseUrl: string,
  dir: string,
  context: BackupLoadContext,
) {
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

const ratioText = (values: number[]): string =>
  `${median(values).toFixed(2)} (${min(values).toFixed(2)}–${max(values).toFixed(2)})`

function section(plants: number, rounds: Round[], context: BackupLoadContext): string[] {
  const ratios = rounds.map((round) => round.with.rps / round.without.rps)
  const rps = (pick: (round: Round) => WrkResult) => Math.round(median(rounds.map((r) => pick(r).rps)))
  const p99 = (pick: (round: Round) => WrkResult) => median(rounds.map((r) => pick(r).p99Ms)).toFixed(2)
  const backups = rounds.flatMap((round) => round.backupSeconds)
  const met = median(ratios) >= BACKUP_LOAD_TARGET ? 'met' : '**missed**'
  return [
    '## Backups under write load',
    '',
    `POST /plants with fresh ids (${context.options.connections} connections) on a SQLite service holding ` +
      `${count(plants)} plants, while \`plantstore backup\` copies its store back to back for the whole run, vs ` +
      `without; ${rounds.length} interleaved rounds of ${context.options.duration} s (the order flips every round). ` +
      'The backups run as processes of their own on any core (bench/backup-load.ts).',
    '',
    '| run | req/s | p99 |',
    '| --- | ---: | ---: |',
    `| without a backup | ${rps((r) => r.without)} | ${p99((r) => r.without)} ms |`,
    `| during backups | ${rps((r) => r.with)} | ${p99((r) => r.with)} ms |`,
    '',
    `- req/s during backups over without, per round: ${ratioText(ratios)}; target ≥ ${BACKUP_LOAD_TARGET}: ${met}`,
    `- backups: ${backups.length} overlapping the measured runs, ${median(backups).toFixed(1)} s each (median, ` +
      `process start to exit, check included); a backup process ran during ${Math.round(100 * median(rounds.map((r) => r.covered)))}% ` +
      'of a measured run (median)',
    '',
  ]
}

/**
 * Seeds a SQLite store of `--large` plants (bench/bulk-seed.ts), starts the service on it on the servers' core and
 * measures; resolves with the report's section. The service stops afterwards.
 */
export async function measureBackupLoad(context: BackupLoadContext, servers: ServerContext): Promise<string[]> {
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
      const order = n % 2 === 1 ? (['without', 'with'] as const) : (['with', 'without'] as const)
      let without: WrkResult | undefined
      let during: Awaited<ReturnType<typeof withBackups>> | undefined
      for (const kind of order) {
        if (options.warmup > 0) await post(server, token, options.warmup, context)
        if (kind === 'without') without = await post(server, token, options.duration, context)
        else during = await withBackups(server, token, databaseUrl, servers.tmpDir, context)
      }
      const done: Round = {
        without: without!,
        with: during!.wrk,
        backupSeconds: during!.backupSeconds,
        covered: during!.covered,
      }
      rounds.push(done)
      log(
        `  backup-load ${n}/${options.rounds}  without ${Math.round(done.without.rps)} req/s, during backups ` +
          `${Math.round(done.with.rps)} req/s (${(done.with.rps / done.without.rps).toFixed(2)}), ` +
          `${done.backupSeconds.length} backups`,
      )
    }
    return section(plants, rounds, context)
  } finally {
    await server.stop()
  }
}
