/**
 * The move from SQLite to PostgreSQL, measured: a SQLite store of N plants (bench/bulk-seed.ts) piped through
 * `plantstore export | plantstore import` (dist/, as an operator runs them) into a fresh PostgreSQL schema (a SQLite
 * file when no PostgreSQL is given). Each process's wall time, plants per second and peak RSS; the target's plants
 * and plant counts checked afterwards. Part of `npm run bench` (20,000 plants with --quick, 1,000,000 otherwise), or
 * alone: `node --import tsx bench/transfer.ts [--plants N]` (PLANTSTORE_BENCH_POSTGRES_URL for the target).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { bulkSeed, checkPlantCounts, countPlants } from './bulk-seed.js'
import { Cleanup } from './cleanup.js'
import { freshDatabase } from './databases.js'
import { REPO_DIR, type ServerContext } from './servers.js'

const ACCOUNT = 'transfer'

/** Plants moved in a full run and with --quick (CI's smoke run: a few seconds). */
export const TRANSFER_PLANTS = { full: 1_000_000, quick: 20_000 }

/** Peak RSS of a running process: its VmHWM (the kernel's high-water mark), read until it exits. */
function watchPeak(child: ChildProcess): () => number {
  let peakKb = 0
  const read = () => {
    try {
      const match = readFileSync(`/proc/${child.pid}/status`, 'utf8').match(/^VmHWM:\s+(\d+) kB/m)
      if (match) peakKb = Math.max(peakKb, Number(match[1]))
    } catch {
      // Gone: the last reading stands.
    }
  }
  const timer = setInterval(read, 20)
  child.once('exit', () => clearInterval(timer))
  return () => peakKb * 1024
}

interface Run {
  seconds: number
  peakBytes: number
  stderr: string
}

/** `plantstore export | plantstore import`, each from dist/, timed from their common start to each one's exit. */
async function pipe(source: string, target: string, context: ServerContext): Promise<[Run, Run]> {
  const main = path.join(REPO_DIR, 'dist', 'cli', 'main.js')
  const started = performance.now()
  const exporter = spawn(process.execPath, [main, 'export', '--database', source], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const importer = spawn(process.execPath, [main, 'import', '--database', target], {
    stdio: ['pipe', 'ignore', 'pipe'],
  })
  exporter.stdout.pipe(importer.stdin)
  return Promise.all(
    [exporter, importer].map((child, i) => {
      context.cleanup.track(child)
      const peak = watchPeak(child)
      let stderr = ''
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
      return new Promise<Run>((resolve, reject) =>
        child.once('close', (code) => {
          const run = { seconds: (performance.now() - started) / 1000, peakBytes: peak(), stderr }
          if (code === 0) resolve(run)
          else reject(new Error(`plantstore ${i === 0 ? 'export' : 'import'} exited ${code}: ${stderr.trim()}`))
        }),
      )
    }),
  ) as Promise<[Run, Run]>
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`
const rate = (plants: number, seconds: number) => `${Math.round(plants / seconds).toLocaleString('en-US')} plants/s`

/** Seeds, moves and checks; the lines the report gives. */
export async function measureTransfer(
  plants: number,
  postgresUrl: string | undefined,
  context: ServerContext,
  log: (line: string) => void,
): Promise<string[]> {
  const source = `sqlite:${path.join(context.tmpDir, 'transfer-source.db')}`
  await bulkSeed(source, [{ name: ACCOUNT, plants }])
  const target = await freshDatabase(
    postgresUrl === undefined ? 'SQLite' : 'PostgreSQL',
    'transfer',
    context,
    postgresUrl,
  )
  log(`transfer: moving ${plants.toLocaleString('en-US')} plants from SQLite to ${target.split(':')[0]}`)
  const [exported, imported] = await pipe(source, target, context)
  const moved = await countPlants(target, ACCOUNT)
  if (moved !== plants) throw new Error(`transfer: the target holds ${moved} plants, expected ${plants}`)
  await checkPlantCounts(target)
  const into = postgresUrl === undefined ? 'another SQLite file (no PostgreSQL given)' : 'PostgreSQL'
  return [
    `Export and import (\`plantstore export | plantstore import\`, dist/, one account of ${plants.toLocaleString('en-US')} ` +
      `plants, SQLite to ${into}): ${imported.seconds.toFixed(1)} s in all; export ${exported.seconds.toFixed(1)} s ` +
      `(${rate(plants, exported.seconds)}), peak RSS ${mb(exported.peakBytes)}; import ${imported.seconds.toFixed(1)} s ` +
      `(${rate(plants, imported.seconds)}), peak RSS ${mb(imported.peakBytes)}. Targets: under 60 s, under 200 MB each.`,
  ]
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { plants: { type: 'string', default: String(TRANSFER_PLANTS.full) } } })
  const cleanup = new Cleanup()
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-transfer-'))
  cleanup.add('remove temp folder', () => rmSync(tmpDir, { recursive: true, force: true }))
  try {
    const lines = await measureTransfer(
      Number(values.plants),
      process.env.PLANTSTORE_BENCH_POSTGRES_URL || undefined,
      { cpu: undefined, tmpDir, cleanup },
      (line) => process.stdout.write(line + '\n'),
    )
    process.stdout.write(lines.join('\n') + '\n')
  } finally {
    await cleanup.run()
  }
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${path.resolve(process.argv[1])}`).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exitCode = 1
  })
}
