import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import { InstrumentedStorage } from '../../src/storage/index.js'
import { open } from '../../src/storage/sqlite/index.js'
import { StorageUnavailableError, type Storage } from '../../src/storage/types.js'
import { plantCreated } from '../../src/webhooks/events.js'

describe('the instrumented store every user of storage gets', () => {
  let dir: string
  let inner: Storage
  let store: InstrumentedStorage
  const calls: Array<[operation: string, failed: boolean]> = []
  let probes = 0
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'plantstore-instrumented-'))
    inner = await open(join(dir, 'store.db'), { migrate: true })
    const probe = inner.health.probeWrite.bind(inner.health)
    inner.health.probeWrite = () => (probes++, probe())
    store = new InstrumentedStorage(inner)
    store.observe((operation, seconds, failed) => {
      assert.ok(seconds >= 0)
      calls.push([operation, failed])
    })
  })
  after(async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Makes the backend's next call of `method` on `part` fail as a database that cannot serve would. */
  function unavailableOnce(part: 'plants' | 'tokens', method: 'create' | 'list' | 'find') {
    const target = inner[part] as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
    const original = target[method]!
    target[method] = () => {
      target[method] = original
      return Promise.reject(new StorageUnavailableError(new Error('disk full')))
    }
  }

  test('tells its observers of every call, by the operation names the metrics use, and whether it failed', async () => {
    calls.length = 0
    const { accountId } = await store.tokens.create(mintToken({ accountName: 'a' }).record)
    await store.plants.create(accountId, { id: 1n, name: 'Fern', tag: null }, plantCreated)
    await store.plants.list(accountId, { limit: 10, fields: { id: true, tag: true } })
    await store.webhooks.countPendingDeliveries()
    await store.health.ping()
    assert.deepEqual(calls, [
      ['createToken', false],
      ['createPlant', false],
      ['listPlants', false],
      ['countPendingDeliveries', false],
      ['ping', false],
    ])
  })

  test('pings with a probe write only once a write has failed for unavailability, until a probe succeeds', async () => {
    probes = 0
    unavailableOnce('plants', 'list')
    await assert.rejects(store.plants.list(1, { limit: 1, fields: { id: true, tag: true } }), StorageUnavailableError)
    await store.health.ping()
    assert.equal(probes, 0, 'a failed read marks nothing')
    unavailableOnce('plants', 'create')
    await assert.rejects(store.plants.create(1, { id: 2n, name: 'x', tag: null }, plantCreated))
    await store.health.ping()
    assert.equal(probes, 1, 'a failed write makes the next ping commit a probe')
    await store.health.ping()
    assert.equal(probes, 1, 'the probe that succeeded cleared the mark')
  })
})
