import assert from 'node:assert/strict'
import fc from 'fast-check'
import { after, before, describe, test } from 'node:test'
import { hashSecret } from '../../src/auth/tokens.js'
import { INT64_MAX, INT64_MIN } from '../../src/schemas/int64.js'
import { openStorage, type InstrumentedStorage } from '../../src/storage/index.js'
import type { NewToken } from '../../src/storage/types.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { plantCreated, plantDeleted } from '../../src/webhooks/events.js'
import { listPlants } from '../helpers/plants.js'

function newToken(overrides: Partial<NewToken> = {}): NewToken {
  const id = `tok_${Math.random().toString(16).slice(2, 18)}`
  return {
    id,
    accountName: 'acme',
    secretHash: hashSecret(id),
    scopes: ['plants:read'],
    label: null,
    expiresAt: null,
    createdBy: null,
    ...overrides,
  }
}

for (const backend of backends) {
  describe(`storage (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let url: string
    let dispose: () => Promise<void>
    let acme: number
    let other: number
    before(async () => {
      ;({ storage, url, dispose } = await freshStorage(backend))
      acme = (await storage.tokens.create(newToken({ accountName: 'acme' }))).accountId
      other = (await storage.tokens.create(newToken({ accountName: 'other' }))).accountId
    })
    after(() => dispose())

    test('reports created, identical and conflict for the same id', async () => {
      assert.equal(await storage.plants.create(acme, { id: 1n, name: 'a', tag: null }, plantCreated), 'created')
      assert.equal(await storage.plants.create(acme, { id: 1n, name: 'a', tag: null }, plantCreated), 'identical')
      assert.equal(await storage.plants.create(acme, { id: 1n, name: 'a', tag: 't' }, plantCreated), 'conflict')
      assert.equal(await storage.plants.create(acme, { id: 1n, name: 'b', tag: null }, plantCreated), 'conflict')
      assert.equal(await storage.plants.create(other, { id: 1n, name: 'b', tag: null }, plantCreated), 'created')
    })

    test('settles concurrent creates of one id as some serial order would', async () => {
      const racer = (await storage.tokens.create(newToken({ accountName: 'racer' }))).accountId
      const same = await Promise.all(
        Array.from({ length: 10 }, () =>
          storage.plants.create(racer, { id: 900n, name: 'same', tag: null }, plantCreated),
        ),
      )
      assert.deepEqual(same.toSorted(), ['created', ...Array<string>(9).fill('identical')])
      const differing = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          storage.plants.create(racer, { id: 901n, name: `n${i}`, tag: null }, plantCreated),
        ),
      )
      assert.deepEqual(differing.toSorted(), [...Array<string>(9).fill('conflict'), 'created'])
      const winner = differing.indexOf('created')
      const [stored] = await listPlants(storage.plants, racer, { limit: 1, after: 900n })
      assert.deepEqual(stored, { id: 901n, name: `n${winner}`, tag: null })
    })

    test('stores and returns int64 extremes exactly, ordered as signed integers', async () => {
      // An account of its own: the order checked is of these plants only, whichever tests ran before.
      const extremes = (await storage.tokens.create(newToken({ accountName: 'extremes' }))).accountId
      for (const id of [INT64_MAX, INT64_MIN, 2n ** 53n + 1n, 2n ** 53n, -5n, 1n]) {
        assert.equal(await storage.plants.create(extremes, { id, name: `n${id}`, tag: null }, plantCreated), 'created')
      }
      const ids = (await listPlants(storage.plants, extremes, { limit: 100 })).map((plant) => plant.id)
      assert.deepEqual(ids, [INT64_MIN, -5n, 1n, 2n ** 53n, 2n ** 53n + 1n, INT64_MAX])
    })

    test('pages with after and limit, filtering by tag', async () => {
      for (let i = 100n; i < 110n; i++) {
        await storage.plants.create(acme, { id: i, name: 'p', tag: i % 2n === 0n ? 'even' : null }, plantCreated)
      }
      const page = await listPlants(storage.plants, acme, { limit: 3, after: 101n, tag: 'even' })
      assert.deepEqual(
        page.map((plant) => plant.id),
        [102n, 104n, 106n],
      )
      assert.ok(page.every((plant) => plant.tag === 'even' && plant.name === 'p'))
      const untagged = await listPlants(storage.plants, acme, { limit: 2, after: 100n })
      assert.deepEqual(
        [...untagged],
        [
          { id: 101n, name: 'p', tag: null },
          { id: 102n, name: 'p', tag: 'even' },
        ],
      )
    })

    test('answers every page size and shape correctly, however many have been asked before', async () => {
      const pager = (await storage.tokens.create(newToken({ accountName: 'pager' }))).accountId
      await Promise.all(
        Array.from({ length: 120 }, (_, i) =>
          storage.plants.create(
            pager,
            { id: BigInt(i + 1), name: `p${i + 1}`, tag: i % 3 === 0 ? 'third' : null },
            plantCreated,
          ),
        ),
      )
      // More distinct (shape, limit) pairs than any statement cache would keep, then the first ones again.
      for (const limit of [...Array.from({ length: 110 }, (_, i) => i + 1), 1, 2, 3]) {
        const first = await listPlants(storage.plants, pager, { limit })
        assert.deepEqual(
          first.map((plant) => plant.id),
          Array.from({ length: Math.min(limit, 120) }, (_, i) => BigInt(i + 1)),
        )
        const tagged = await listPlants(storage.plants, pager, { limit, after: 10n, tag: 'third' })
        const expected = Array.from({ length: 40 }, (_, i) => BigInt(3 * i + 1)).filter((id) => id > 10n)
        assert.deepEqual(
          tagged.map((plant) => plant.id),
          expected.slice(0, limit),
        )
      }
    })

    // The route sends the page's JSON as the backend wrote it, so it must be the bytes the API's serialiser wrote:
    // "name", then "id" and "tag" as asked, no white space, every string escaped as JSON.stringify does.
    test('writes each page as the exact JSON text of its items, for every choice of fields', async () => {
      const text = fc
        .string({ unit: 'grapheme', minLength: 1, maxLength: 12 })
        .chain((s) => fc.constantFrom(s, `${s}"\\\u0001\u001f\u007f\u2028\u{1F331}`, `\b\t\n\f\r${s}`))
        .filter((s) => !s.includes('\u0000'))
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.record({ name: text, tag: fc.option(text, { nil: null }) }), { maxLength: 6 }),
          async (drafts) => {
            const account = (await storage.tokens.create(newToken({ accountName: `json-${Math.random()}` }))).accountId
            const plants = drafts.map((draft, i) => ({ id: INT64_MAX - BigInt(i * 7), ...draft }))
            for (const plant of plants) await storage.plants.create(account, plant, plantCreated)
            const ascending = plants.toSorted((a, b) => (a.id < b.id ? -1 : 1))
            for (const id of [false, true]) {
              for (const tag of [false, true]) {
                const expected = ascending.map(
                  (plant) =>
                    `{"name":${JSON.stringify(plant.name)}${id ? `,"id":${plant.id}` : ''}` +
                    `${tag && plant.tag !== null ? `,"tag":${JSON.stringify(plant.tag)}` : ''}}`,
                )
                const page = await storage.plants.list(account, { limit: 10, fields: { id, tag } })
                assert.equal(page.json, `[${expected.join(',')}]`)
              }
            }
          },
        ),
        { numRuns: 25 },
      )
    })

    test('tells the last id of a page and whether more plants follow it', async () => {
      const account = (await storage.tokens.create(newToken({ accountName: 'pages' }))).accountId
      const fields = { id: false, tag: true }
      assert.deepEqual(await storage.plants.list(account, { limit: 2, fields }), {
        json: '[]',
        lastId: undefined,
        more: false,
      })
      for (const id of [30n, 10n, 20n]) {
        await storage.plants.create(account, { id, name: `p${id}`, tag: id === 20n ? 'x' : null }, plantCreated)
      }
      const first = await storage.plants.list(account, { limit: 2, fields })
      assert.deepEqual(first, { json: '[{"name":"p10"},{"name":"p20","tag":"x"}]', lastId: 20n, more: true })
      const last = await storage.plants.list(account, { limit: 2, after: 20n, fields })
      assert.deepEqual(last, { json: '[{"name":"p30"}]', lastId: 30n, more: false })
      const exact = await storage.plants.list(account, { limit: 3, fields })
      assert.deepEqual([exact.lastId, exact.more], [30n, false], 'a page that ends on the last plant says so')
      const tagged = await storage.plants.list(account, { limit: 1, tag: 'x', fields })
      assert.deepEqual([tagged.lastId, tagged.more], [20n, false], 'more counts only plants the filter keeps')
    })

    test('gets a plant by id only within the account, exactly at the int64 edges', async () => {
      const reader = (await storage.tokens.create(newToken({ accountName: 'reader' }))).accountId
      for (const id of [INT64_MAX, INT64_MIN, 2n ** 53n, 2n ** 53n + 1n]) {
        await storage.plants.create(reader, { id, name: `n${id}`, tag: id > 0n ? 'big' : null }, plantCreated)
      }
      assert.deepEqual(await storage.plants.get(reader, INT64_MAX), {
        id: INT64_MAX,
        name: `n${INT64_MAX}`,
        tag: 'big',
      })
      assert.deepEqual(await storage.plants.get(reader, INT64_MIN), { id: INT64_MIN, name: `n${INT64_MIN}`, tag: null })
      assert.equal((await storage.plants.get(reader, 2n ** 53n + 1n))?.name, `n${2n ** 53n + 1n}`)
      assert.equal(await storage.plants.get(reader, 7n), undefined, 'an id the account does not have')
      assert.equal(await storage.plants.get(other, INT64_MAX), undefined, "another account's plant")
      await storage.plants.delete(reader, INT64_MAX, plantDeleted)
      assert.equal(await storage.plants.get(reader, INT64_MAX), undefined, 'a deleted plant')
    })

    test('deletes only within the account', async () => {
      await storage.plants.create(acme, { id: 500n, name: 'x', tag: null }, plantCreated)
      assert.equal(await storage.plants.delete(other, 500n, plantDeleted), false)
      assert.equal(await storage.plants.delete(acme, 500n, plantDeleted), true)
      assert.equal(await storage.plants.delete(acme, 500n, plantDeleted), false)
    })

    test('finds tokens by secret hash with their account and scopes', async () => {
      const expiresAt = new Date(Date.now() + 60_000)
      const input = newToken({ accountName: 'acme', scopes: ['plants:read', 'plants:write'], label: 'ci', expiresAt })
      const created = await storage.tokens.create(input)
      assert.equal(created.accountId, acme)
      const found = await storage.tokens.find(input.secretHash)
      assert.equal(found?.id, input.id)
      assert.equal(found?.accountName, 'acme')
      assert.deepEqual(found?.scopes, ['plants:read', 'plants:write'])
      assert.equal(found?.label, 'ci')
      assert.equal(found?.expiresAt?.getTime(), expiresAt.getTime())
      assert.equal(found?.revokedAt, null)
      assert.ok(found?.secretHash.equals(input.secretHash))
      assert.equal(await storage.tokens.find(hashSecret('nope')), undefined)
    })

    test('revokes a token once', async () => {
      const input = newToken()
      await storage.tokens.create(input)
      assert.equal(await storage.tokens.revoke(input.id), true)
      assert.equal(await storage.tokens.revoke(input.id), false)
      assert.equal(await storage.tokens.revoke('tok_missing'), false)
      assert.ok((await storage.tokens.find(input.secretHash))?.revokedAt instanceof Date)
    })

    test('removes only the named account’s token, in any state', async () => {
      const input = newToken({ accountName: 'remover' })
      const { accountId } = await storage.tokens.create(input)
      assert.equal(await storage.tokens.remove(input.id, other), false, 'another account’s id')
      assert.ok(await storage.tokens.find(input.secretHash))
      await storage.tokens.revoke(input.id)
      assert.equal(await storage.tokens.remove(input.id, accountId), true)
      assert.equal(await storage.tokens.find(input.secretHash), undefined)
      assert.equal(await storage.tokens.remove(input.id, accountId), false)
    })

    test('creates a token only while the account holds fewer than the quota not revoked', async () => {
      const quota = 2
      const expired = newToken({ accountName: 'capped', expiresAt: new Date(Date.now() - 1000) })
      await storage.tokens.create(expired, quota)
      const live = newToken({ accountName: 'capped' })
      await storage.tokens.create(live, quota)
      await assert.rejects(storage.tokens.create(newToken({ accountName: 'capped' }), quota), {
        name: 'QuotaExceededError',
        resource: 'tokens',
        limit: 2,
      })
      await storage.tokens.create(newToken({ accountName: 'capped' }), 0)
      await storage.tokens.revoke(live.id)
      await assert.rejects(storage.tokens.create(newToken({ accountName: 'capped' }), quota), {
        name: 'QuotaExceededError',
      })
      const { accountId } = await storage.tokens.create(newToken({ accountName: 'uncapped' }), quota)
      assert.equal(
        await storage.tokens.remove(expired.id, (await storage.tokens.find(expired.secretHash))!.accountId),
        true,
      )
      await storage.tokens.create(newToken({ accountName: 'capped' }), quota)
      assert.ok(accountId > 0)
    })

    test('holds the token quota when many creates race at it', async () => {
      const quota = 3
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => storage.tokens.create(newToken({ accountName: 'racing-tokens' }), quota)),
      )
      assert.equal(results.filter((result) => result.status === 'fulfilled').length, quota)
      assert.equal((await storage.tokens.list('racing-tokens')).length, quota)
    })

    test('gives the id of an account by name, creating it once', async () => {
      const id = await storage.tokens.accountId('by-name')
      assert.equal(await storage.tokens.accountId('by-name'), id)
      assert.notEqual(await storage.tokens.accountId('another-name'), id)
      assert.equal(await storage.tokens.accountId('acme'), acme)
      const [first, second] = await Promise.all([
        storage.tokens.accountId('racing'),
        storage.tokens.accountId('racing'),
      ])
      assert.equal(first, second)
    })

    test('lists tokens without secret hashes, filtered by account', async () => {
      // Tokens of its own beside the two made before: it lists as many whether or not earlier tests made more.
      for (const label of ['list-1', 'list-2']) await storage.tokens.create(newToken({ accountName: 'acme', label }))
      const all = await storage.tokens.list()
      assert.ok(all.length >= 4)
      assert.ok(all.every((token) => !('secretHash' in token)))
      const others = await storage.tokens.list('other')
      assert.deepEqual(
        others.map((token) => token.accountName),
        ['other'],
      )
      assert.equal(await storage.tokens.count(), all.length)
    })

    test('stores exactly one plant when many connections create the same id at once', async () => {
      const others = await Promise.all([1, 2, 3].map(() => openStorage(url)))
      try {
        const stores = [storage, ...others]
        const outcomes = await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            stores[i % stores.length]!.plants.create(acme, { id: 777n, name: 'race', tag: null }, plantCreated),
          ),
        )
        assert.equal(outcomes.filter((outcome) => outcome === 'created').length, 1)
        assert.equal(outcomes.filter((outcome) => outcome === 'identical').length, 39)
      } finally {
        await Promise.all(others.map((other) => other.close()))
      }
    })

    test('commits a probe write that leaves plants and tokens as they were', async () => {
      const plants = await listPlants(storage.plants, acme, { limit: 1000 })
      const tokens = await storage.tokens.list()
      await storage.health.probeWrite()
      await storage.health.probeWrite()
      assert.deepEqual(await listPlants(storage.plants, acme, { limit: 1000 }), plants)
      assert.deepEqual(await storage.tokens.list(), tokens)
    })

    test('keeps everything when reopened (migrations run once)', async () => {
      // A plant to find after the reopening, already there (identical) when the first test ran.
      await storage.plants.create(acme, { id: 1n, name: 'a', tag: null }, plantCreated)
      const again = await openStorage(url)
      assert.deepEqual(again.migrationsApplied, [])
      try {
        assert.equal((await listPlants(again.plants, acme, { limit: 1 })).length, 1)
        assert.equal(await again.tokens.count(), await storage.tokens.count())
        await again.health.ping()
      } finally {
        await again.close()
      }
    })
  })
}
