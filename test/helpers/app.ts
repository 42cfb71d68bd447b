import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import type { Storage } from '../../src/storage/index.js'
import { backends, freshStorage, type TestBackend } from './backends.js'

/** An app on a fresh database, with a way to mint tokens for it. */
export interface TestApp {
  app: FastifyInstance
  storage: Storage
  /** Creates a token and returns its secret. */
  token(account?: string, options?: { scopes?: string[]; expiresAt?: Date | null }): Promise<string>
  close(): Promise<void>
}

/** Builds the app on a fresh database of `backend` (SQLite when not given). */
export async function buildTestApp(backend: TestBackend = backends[0]!, tokenCacheTtlMs = 2000): Promise<TestApp> {
  const { storage, dispose } = await freshStorage(backend)
  const app = await buildApp({ storage, tokenCacheTtlMs })
  return {
    app,
    storage,
    async token(account = 'alice', options = {}) {
      return (await issueToken(storage, { accountName: account, ...options })).secret
    },
    async close() {
      await app.close()
      await dispose()
    },
  }
}

/** Authorization header for a secret. */
export function bearer(secret: string): { authorization: string } {
  return { authorization: `Bearer ${secret}` }
}
