import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStorage, type Storage } from '../../src/storage/index.js'

/** A database a test can open storage on, and throw away afterwards. */
export interface TestDatabase {
  url: string
  dispose(): Promise<void>
}

/** A storage backend the shared suites run against. */
export interface TestBackend {
  name: string
  createDatabase(): Promise<TestDatabase>
}

const sqlite: TestBackend = {
  name: 'sqlite',
  async createDatabase() {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-test-'))
    return {
      url: `sqlite:${join(dir, 'store.db')}`,
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    }
  },
}

/** Every backend available on this machine; suites loop over it. */
export const backends: TestBackend[] = [sqlite]

/** Opens storage on a fresh database of the backend; dispose() closes and removes it. */
export async function freshStorage(
  backend: TestBackend,
): Promise<{ storage: Storage; url: string; dispose(): Promise<void> }> {
  const database = await backend.createDatabase()
  const storage = openStorage(database.url)
  return {
    storage,
    url: database.url,
    dispose: async () => {
      await storage.close()
      await database.dispose()
    },
  }
}
