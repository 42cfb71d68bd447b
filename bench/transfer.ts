/**
 * The move from SQLite to PostgreSQL (issue 27), measured: a SQLite store of N plants piped through `plantstore
 * export | plantstore import` (dist/, as an operator runs them) into a fresh PostgreSQL schema (a SQLite file when
 * no PostgreSQL is given); each process's wall time, rate and peak RSS; the target's plants and counts checked.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { bulkSeed, checkPlantCounts, countPlants } from './bulk-seed.js'
import { freshDatabase } from './databases.js'
import { statusKb } from './rss.js'
import { REPO_DIR, type ServerContext } from './servers.js'

/** Plants moved in a full run and with --quick (CI's smoke run: a few seconds). */
export const TRANSFER_PLANTS = { full: 1_000_000, quick: 20_000 }

type Run = { seconds: number; peakBytes: number }

/** Peak RSS of a running process: its VmHWM (the kernel's high-water mark), read every 20 ms until it exits. */
function watchPeak(child: ChildProcess): () => number {
  let peakKb = 0
  const timer = setInterval(() => {
    try {
      peakKb = Math.max(peakKb, statusKb(child.pid ?? 0, 'VmHWM'))
    } catch {
      // Gone: the last reading stands.
    }
  }, 20)
  child.once('exit', () => clearInterval(timer))
  return () => peakKb * 1024
}

/** `plantstore export | plantstore import`, each timed from their common start to its exit. */
async function pipe(source: string, target: string, context: ServerContext) {
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
          if (code === 0) resolve({ seconds: (performance.now() - started) / 1000, peakBytes: peak() })
          else reject(new Error(`plantstore ${i === 0 ? 'export' : 'import'} exited ${code}: ${stderr.trim()}`))
        }),
      )
    }),
  )
}

/** Seeds, moves and checks; the report's note. */
export async function measureTransfer(
  plants: number,
  postgresUrl: string | undefined,
  context: ServerContext,
  log: (line: string) => void,
): Promise<string[]> {
  const source = `sqlite:${path.join(context.tmpDir, 'transfer-source.db')}`
  await bulkSeed(source, [{ name: 'transfer', plants }])
  const target = await freshDatabase(
    postgresUrl === undefined ? 'SQLite' : 'PostgreSQL',
    'transfer',
    context,
    postgresUrl,
  )
  log(`transfer: moving ${plants.toLocaleString('en-US')} plants from SQLite to ${target.split(':')[0]}`)
  const [exported, imported] = (await pipe(source, target, context)) as [Run, Run]
  const moved = await countPlants(target, 'transfer')
  if (moved !== plants) throw new Error(`transfer: the target holds ${moved} plants, expected ${plants}`)
  await checkPlantCounts(target)
  const into = postgresUrl === undefined ? 'another SQLite file (no PostgreSQL given)' : 'PostgreSQL'
  const run = (name: string, r: Run) =>
    `${name} ${r.seconds.toFixed(1)} s (${Math.round(plants / r.seconds).toLocaleString('en-US')} plants/s), ` +
    `peak RSS ${(r.peakBytes / 2 ** 20).toFixed(0)} MB`
  return [
    `Export and import (\`plantstore export | plantstore import\`, dist/, one account of ${plants.toLocaleString('en-US')} ` +
      `plants, SQLite to ${into}): ${imported.seconds.toFixed(1)} s in all; ${run('export', exported)}; ` +
      `${run('import', imported)}. Targets: under 60 s, under 200 MB each.`,
  ]
}
