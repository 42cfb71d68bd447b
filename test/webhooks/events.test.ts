import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { plantCreated, plantDeleted } from '../../src/webhooks/events.js'

describe('webhook events', () => {
  test('gives every event an id of its own: msg_ and 16 random bytes in base64url', () => {
    // More than one batch of the random bytes ids are drawn from, created and deleted events mixed.
    const ids = Array.from({ length: 1000 }, (_, i) =>
      i % 2 === 0 ? plantCreated({ id: BigInt(i), name: 'Fern', tag: null }).id : plantDeleted(BigInt(i)).id,
    )
    for (const id of ids) assert.match(id, /^msg_[A-Za-z0-9_-]{22}$/)
    assert.equal(new Set(ids).size, ids.length)
  })

  test('writes the contract body of each event, the int64 id exact', () => {
    const created = plantCreated({ id: 9007199254740993n, name: 'Fern "green"', tag: 'shade' })
    assert.deepEqual(
      [created.type, created.body],
      ['plant.created', '{"id":9007199254740993,"name":"Fern \\"green\\"","tag":"shade"}'],
    )
    const deleted = plantDeleted(9007199254740993n)
    assert.deepEqual([deleted.type, deleted.body], ['plant.deleted', '{"id":9007199254740993}'])
  })
})
