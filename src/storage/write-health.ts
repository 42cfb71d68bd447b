import { StorageUnavailableError } from '../errors.js'
import type { Storage } from './types.js'

// The calls that write; one failing because the database cannot take writes marks the store as failing.
const WRITES = new Set<PropertyKey>([
  'createPlant',
  'deletePlant',
  'createToken',
  'createFirstToken',
  'revokeToken',
  'createSubscription',
  'deleteSubscription',
  'enableSubscription',
  'claimDeliveries',
  'finishDelivery',
  'purgeFailedDeliveries',
  'settleDisabled',
])

/**
 * The same storage, whose ping() answers for writes too. A database can answer reads while refusing writes (disk
 * full, read-only, SQLite's write lock held by another process); once a write has failed that way, ping() commits
 * a probe write and fails until one succeeds. Only the probe clears the mark: a write that changed nothing (a
 * DELETE of an absent id, an identical re-POST) can succeed on a full disk. Readiness so reports the outage and
 * sees the recovery without client traffic, while a healthy store's ping() stays a read. Per process: each
 * instance reports what its own writes met.
 */
export function watchWrites(storage: Storage): Storage {
  let failing = false
  const watch = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work
    } catch (err) {
      if (err instanceof StorageUnavailableError) failing = true
      throw err
    }
  }
  return new Proxy(storage, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property)
      if (property === 'ping') {
        return async () => {
          await target.ping()
          if (!failing) return
          await target.probeWrite()
          failing = false
        }
      }
      if (!WRITES.has(property) || typeof value !== 'function') return value
      return (...args: unknown[]) => watch((value as (...a: unknown[]) => Promise<unknown>).apply(target, args))
    },
  })
}
