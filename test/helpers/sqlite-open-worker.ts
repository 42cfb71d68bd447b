import { parentPort, workerData } from 'node:worker_threads'
import { openDatabase } from '../../src/storage/sqlite/database.js'

// One of several connections racing to open the same new SQLite files: round r starts when the parent sets the
// shared round counter to r, so every worker calls openDatabase within microseconds of the others.
const { round, rounds, fileOf } = workerData as { round: Int32Array; rounds: number; fileOf: string }

for (let r = 1; r <= rounds; r++) {
  Atomics.wait(round, 0, r - 1)
  try {
    openDatabase(fileOf.replace('%d', String(r)), 5000).close()
    parentPort!.postMessage('ok')
  } catch (err) {
    parentPort!.postMessage(`${(err as { code?: string }).code}: ${(err as Error).message}`)
  }
}
