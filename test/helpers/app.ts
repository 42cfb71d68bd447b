import { AsyncLocalStorage } from 'node:async_hooks'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildApp, type AppOptions } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import type { InstrumentedStorage } from '../../src/storage/index.js'
import type { StorageLimits } from '../../src/storage/types.js'
import { backends, freshStorage, type TestBackend } from './backends.js'
import { openApiChecker, type ResponseCheck } from './openapi.js'

/** An app on a fresh database, with a way to mint tokens for it. */
export interface TestApp {
  app: FastifyInstance
  storage: InstrumentedStorage
  /** Creates a token and returns its secret. */
  token(account?: string, options?: { scopes?: string[]; expiresAt?: Date | null }): Promise<string>
  close(): Promise<void>
}

/** Builds the app on a fresh database of `backend` (SQLite when not given), with `limits` (no quotas when not given). */
export async function buildTestApp(
  backend: TestBackend = backends[0]!,
  tokenCacheTtlMs = 2000,
  limits?: StorageLimits,
  options: Omit<AppOptions, 'storage'> = {},
): Promise<TestApp> {
  const { storage, dispose } = await freshStorage(backend, { migrate: true, limits })
  const app = await buildApp({ storage, tokenCacheTtlMs, ...options })
  checkEveryResponse(app)
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

const provoked = new AsyncLocalStorage<number>()

/**
 * Runs `requests`, in which the test provokes `status` (a 5xx) on purpose: the check of every response lets that
 * status through for the requests made inside, and no other 5xx.
 */
export function expectServerError<T>(status: number, requests: () => Promise<T>): Promise<T> {
  return provoked.run(status, requests)
}

/**
 * Every response a test gets from `app.inject` is checked against the app's own OpenAPI document, read at the
 * first request (a test may still add routes before it); a 5xx fails unless made inside expectServerError.
 * Returns `app`.
 */
export function checkEveryResponse(app: FastifyInstance): FastifyInstance {
  const inject = app.inject.bind(app) as (options: InjectOptions) => Promise<LightMyRequestResponse>
  let check: ResponseCheck | undefined
  const checked = async (options: InjectOptions) => {
    const res = await inject(options)
    check ??= await openApiChecker({ inject } as Pick<FastifyInstance, 'inject'>)
    check(options.method ?? 'GET', String(options.url), res, { expectServerError: provoked.getStore() })
    return res
  }
  return Object.assign(app, { inject: checked })
}

/** Authorization header for a secret. */
export function bearer(secret: string): { authorization: string } {
  return { authorization: `Bearer ${secret}` }
}
