import { StorageUnavailableError } from '../errors.js'
import type { Storage } from './types.js'

// The calls that write; their outcome says whether the database takes writes.
const WRITES = new Set<PropertyKey>([
  'createPlant',
  'deletePlant',
  'createToken',
  'createFirstToken',
  'revokeToken',
  'probeWrite',
])

/**
 * The same storage, whose ping() answers for writes too. A database can answer reads while refusing writes (disk
 * full, read-only, a write lock held elsewhere); once a write has failed that way, ping() commits a probe write
 * and fails until one succeeds. Readiness so reports the outage, and sees the recovery without client traffic,
 * while a healthy store's ping() stays a read.
 */
export function watchWrites(storage: Storage): Storage {
  let failing = false
  const watch = async <T>(work: Promise<T>): Promise<T> => {
    try {
      const value = await work
      failing = false
      return value
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
          if (failing) await watch(target.probeWrite())
        }
      }
      if (!WRITES.has(property) || typeof value !== 'function') return value
      return (...args: unknown[]) => watch((value as (...a: unknown[]) => Promise<unknown>).apply(target, args))
    },
  })
}
