import { issueToken } from '../../src/auth/issue-token.js'
import { openStorage, type InstrumentedStorage } from '../../src/storage/index.js'
import { plantCreated } from '../../src/webhooks/events.js'
import type { TestBackend } from './backends.js'

/** A database of the backend for a big-page attack, with its attacker's and its other account's tokens. */
export interface BigPageDatabase {
  database: string
  dispose: () => Promise<void>
  mallory: string
  alice: string
}

/** Stores `count` plants named `name` and tagged `tag` (ids 1 up) for the account, 100 at a time. */
export async function fillPlants(
  storage: Pick<InstrumentedStorage, 'plants'>,
  accountId: number,
  plants: { count: number; name: string; tag: string | null },
): Promise<void> {
  const { name, tag } = plants
  for (let from = 1; from <= plants.count; from += 100) {
    const ids = Array.from({ length: Math.min(100, plants.count - from + 1) }, (_, i) => BigInt(from + i))
    await Promise.all(ids.map((id) => storage.plants.create(accountId, { id, name, tag }, plantCreated)))
  }
}

/**
 * A database of the backend whose account mallory holds `pages` plants named `name` and tagged `tag` (ids 1 up), and
 * whose account alice holds `alicePlants` small ones. The pages come from the database, so the attack runs on each
 * backend.
 */
export async function bigPageDatabase(
  backend: TestBackend,
  plants: { count: number; name: string; tag: string; alicePlants?: number },
): Promise<BigPageDatabase> {
  const { url: database, dispose } = await backend.createDatabase()
  const storage = await openStorage(database)
  try {
    const mallory = await issueToken(storage, { accountName: 'mallory' })
    const alice = await issueToken(storage, { accountName: 'alice' })
    await fillPlants(storage, mallory.token.accountId, plants)
    for (let id = 1n; id <= BigInt(plants.alicePlants ?? 0); id++) {
      await storage.plants.create(alice.token.accountId, { id, name: `fern ${id}`, tag: null }, plantCreated)
    }
    return { database, dispose, mallory: mallory.secret, alice: alice.secret }
  } finally {
    await storage.close()
  }
}
