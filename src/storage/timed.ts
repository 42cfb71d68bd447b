import type { Storage } from './types.js'

/** Receives how long one storage call took, and whether it failed. */
export type StorageTimer = (operation: string, seconds: number, failed: boolean) => void

/** The same storage, with every method call timed; for the storage latency metric. */
export function timedStorage(storage: Storage, observe: StorageTimer): Storage {
  return new Proxy(storage, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property)
      if (typeof value !== 'function' || typeof property !== 'string' || property === 'close') return value
      return async (...args: unknown[]) => {
        const started = process.hrtime.bigint()
        let failed = true
        try {
          const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)
          failed = false
          return result
        } finally {
          observe(property, Number(process.hrtime.bigint() - started) / 1e9, failed)
        }
      }
    },
  })
}
