/**
 * Backups under write load (issue 27): one SQLite service of `--large` plants, as two targets of the `backup-load`
 * scenario: without backups, and with `plantstore backup` copying its store back to back around each of its runs,
 * the first backup begun copying before wrk starts. The backups run as an operator's would, processes of their own
 * on any core.
 */
import { readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { bulkSeed } from './bulk-seed.js'
import { freshDatabase } from './databases.js'
import { run } from './machine.js'
import { median } from './report-rows.js'
import { newTarget, type Pair } from './rounds.js'
import { ACCOUNT_NAMES } from './scenarios.js'
import { REPO_DIR, SERVICE_MAIN, SERVICE_NODE_FLAGS, startService, type ServerContext } from './servers.js'

/** `plantstore backup` (built, with the service's node flags) under `cpus`; its wall time in seconds. */
async function backupOnce(databaseUrl: string, file: string, cpus: string[]): Promise<number> {
  const [command = '', ...args] = [...cpus, process.execPath, ...SERVICE_NODE_FLAGS, SERVICE_MAIN, 'backup', file]
  const started = performance.now()
  await run(command, [...args, '--database', databaseUrl], { cwd: REPO_DIR })
    .catch((err: Error & { stderr?: string }) => {
      throw new Error(`plantstore backup failed: ${err.stderr?.trim() || err.message}`)
    })
    .finally(() => rmSync(file, { force: true }))
  return (performance.now() - started) / 1000
}

/** Seeds the store and starts its service; the scenario's two targets, and a note on the backups once done. */
export async function startBackupLoad(plants: number, context: ServerContext) {
  const databaseUrl = await freshDatabase('SQLite', 'backup_load', context)
  const [seeded] = await bulkSeed(databaseUrl, [{ name: ACCOUNT_NAMES.list, plants }])
  const token = seeded?.token ?? ''
  const pair: Pair = { name: 'SQLite', without: 'SQLite without backups', with: 'SQLite during backups' }
  const server = await startService(pair.without, databaseUrl, token, context)
  // The harness runs pinned to the load core (when pinning); the backups get every core back, as on a server.
  const cpus = context.cpu === undefined ? [] : ['taskset', '-c', `0-${os.cpus().length - 1}`]
  const seconds: number[] = []
  const around = async <T>(run: () => Promise<T>): Promise<T> => {
    let running = true
    const loop = (async () => {
      for (let n = 1; running; n++)
        seconds.push(await backupOnce(databaseUrl, path.join(context.tmpDir, `backup-load-${n}.db`), cpus))
    })().finally(() => (running = false))
    const begun = () => readdirSync(context.tmpDir).some((name) => /^backup-load-.*\.tmp$/.test(name))
    while (running && !begun()) await new Promise((resolve) => setTimeout(resolve, 5))
    try {
      return await run()
    } finally {
      running = false
      await loop
    }
  }
  const without = newTarget(server, { list: token }, databaseUrl)
  const during = { ...without, server: { ...server, label: pair.with }, around }
  const note = () =>
    `backup-load: ${seconds.length} backups ran back to back around the "during backups" runs (warm-ups ` +
    `included), ${median(seconds).toFixed(1)} s each (median, process start to exit, check included)`
  return { targets: [without, during], pairs: [pair], note }
}
