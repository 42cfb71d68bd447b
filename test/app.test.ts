import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildApp } from '../src/app.js'
import { backends, freshStorage } from './helpers/backends.js'

test('closes the resources it owns when it closes, in their order, after every other close hook', async () => {
  const { storage, dispose } = await freshStorage(backends[0]!)
  const closed: string[] = []
  const resource = (name: string) => ({ close: async () => void closed.push(name) })
  const app = await buildApp({ storage, owned: [resource('storage'), resource('redis')] })
  // Registered after the app's own hooks, as a plugin's would be: it must still run before the resources close.
  app.addHook('onClose', async () => void closed.push('a plugin of the app'))
  await app.ready()
  await app.close()
  assert.deepEqual(closed, ['a plugin of the app', 'storage', 'redis'])
  await dispose()
})

test('closes every resource it owns even when one fails to close, and reports the failure', async () => {
  const { storage, dispose } = await freshStorage(backends[0]!)
  const closed: string[] = []
  const failing = { close: async () => Promise.reject(new Error('disk gone')) }
  const app = await buildApp({ storage, owned: [failing, { close: async () => void closed.push('redis') }] })
  await app.ready()
  await assert.rejects(app.close(), /disk gone/)
  assert.deepEqual(closed, ['redis'], 'a Redis client left open would keep the process alive')
  await dispose()
})
