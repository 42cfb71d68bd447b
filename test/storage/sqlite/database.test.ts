import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { Worker } from 'node:worker_threads'
import { openDatabase } from '../../../src/storage/sqlite/database.js'

const WORKERS = 6
const ROUNDS = 100
// A worker does not inherit the test runner's TypeScript loader: it loads its module through tsx's API.
const WORKER_SOURCE = `import('tsx/esm/api').then(({ tsImport }) =>
  tsImport(${JSON.stringify(new URL('../../helpers/sqlite-open-worker.ts', import.meta.url).href)}, 'file:///'))`

describe('opening a SQLite file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-sqlite-open-'))
  after(() => rmSync(dir, { recursive: true, force: true }))

  // Servers and CLI commands started together on a new file all switch it to WAL; SQLite answers one of them
  // "database is locked" at once, without waiting, when their lock upgrades would deadlock.
  test('opens one new file from many connections at once: none fails with "database is locked"', async () => {
    const round = new Int32Array(new SharedArrayBuffer(4))
    const answers: string[] = []
    let pending = 0
    let workerFailed = false
    let roundDone = (): void => {}
    const workers = Array.from({ length: WORKERS }, () => {
      const worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { round, rounds: ROUNDS, fileOf: join(dir, 'store-%d.db') },
      })
      worker.on('error', (err) => {
        answers.push(`worker failed: ${err.message}`)
        // A worker that died answers no later round: stop, rather than wait for it.
        workerFailed = true
        roundDone()
      })
      worker.on('message', (answer: string) => {
        answers.push(answer)
        if (--pending === 0) roundDone()
      })
      return worker
    })
    try {
      for (let r = 1; r <= ROUNDS && !workerFailed; r++) {
        const done = new Promise<void>((resolve) => (roundDone = resolve))
        pending = WORKERS
        Atomics.store(round, 0, r)
        Atomics.notify(round, 0)
        await done
      }
    } finally {
      await Promise.all(workers.map((worker) => worker.terminate()))
    }
    assert.deepEqual(
      answers.filter((answer) => answer !== 'ok'),
      [],
    )
    assert.equal(answers.length, WORKERS * ROUNDS)
  })

  test('creates the store and its -wal and -shm files readable and writable by the owner alone', () => {
    const file = join(dir, 'owner-only.db')
    const db = openDatabase(file, 1000)
    try {
      db.exec('CREATE TABLE secrets (hash TEXT); INSERT INTO secrets VALUES (1)')
      const modes = Object.fromEntries(
        readdirSync(dir)
          .filter((name) => name.startsWith('owner-only.db'))
          .map((name) => [name, (statSync(join(dir, name)).mode & 0o777).toString(8)]),
      )
      assert.deepEqual(modes, { 'owner-only.db': '600', 'owner-only.db-shm': '600', 'owner-only.db-wal': '600' })
    } finally {
      db.close()
    }
  })
})
