import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppOptions } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import {
  InstrumentedStorage,
  NO_LIMITS,
  openStorage,
  type ClaimOutcome,
  type IdempotencyStore,
  type KeyClaim,
  StorageUnavailableError,
  type CreateOutcome,
  type EventOf,
  type PageRequest,
  type PlantPage,
  type PlantStore,
  type StoredPlant,
} from '../../src/storage/index.js'
import { bearer, checkEveryResponse, expectServerError } from '../helpers/app.js'
import { backends, freshStorage, type TestBackend } from '../helpers/backends.js'

/** Plant creates that wait while the test holds them, or fail once as unavailable: a request caught mid-handler. */
class HeldPlants implements PlantStore {
  #held: Promise<void> | undefined
  #release = () => {}
  failNext = false

  constructor(readonly inner: PlantStore) {}

  hold(): () => void {
    this.#held = new Promise((resolve) => (this.#release = resolve))
    return () => {
      this.#held = undefined
      this.#release()
    }
  }

  async create(accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>): Promise<CreateOutcome> {
    if (this.failNext) {
      this.failNext = false
      throw new StorageUnavailableError(new Error('the test made it fail'))
    }
    await this.#held
    return this.inner.create(accountId, plant, event)
  }

  get(accountId: number, id: bigint): Promise<StoredPlant | undefined> {
    return this.inner.get(accountId, id)
  }

  list(accountId: number, page: PageRequest): Promise<PlantPage> {
    return this.inner.list(accountId, page)
  }

  delete(accountId: number, id: bigint, event: EventOf<bigint>): Promise<boolean> {
    return this.inner.delete(accountId, id, event)
  }
}

/** Keys whose next answer cannot be kept: the database fails that one write. */
class KeysFailingOnce implements IdempotencyStore {
  failNext = false

  constructor(readonly inner: IdempotencyStore) {}

  claim(claim: KeyClaim): Promise<ClaimOutcome> {
    return this.inner.claim(claim)
  }

  async complete(accountId: number, key: string, lease: string, status: number, body: string): Promise<void> {
    if (this.failNext) {
      this.failNext = false
      throw new StorageUnavailableError(new Error('the test made it fail'))
    }
    return this.inner.complete(accountId, key, lease, status, body)
  }

  release(accountId: number, key: string, lease: string): Promise<void> {
    return this.inner.release(accountId, key, lease)
  }

  purgeExpired(limit: number): Promise<number> {
    return this.inner.purgeExpired(limit)
  }
}

interface Instance {
  app: FastifyInstance
  plants: HeldPlants
  keys: KeysFailingOnce
}

/** An app over `storage`, its plant creates holdable. */
async function instanceOn(storage: InstrumentedStorage, options: Omit<AppOptions, 'storage'> = {}): Promise<Instance> {
  const plants = new HeldPlants(storage.plants)
  const keys = new KeysFailingOnce(storage.idempotency)
  const held = new InstrumentedStorage({
    plants,
    tokens: storage.tokens,
    webhooks: storage.webhooks,
    idempotency: keys,
    health: storage.health,
    migrationsApplied: [],
    close: async () => {},
  })
  const app = checkEveryResponse(await buildApp({ storage: held, webhooks: { allowPrivate: true }, ...options }))
  return { app, plants, keys }
}

type Headers = Record<string, string | string[]>
const json = { 'content-type': 'application/json' }

/** POST /plants as `headers` say, with `key` as its Idempotency-Key when given. */
const postPlant = (app: FastifyInstance, headers: Headers, payload: string, key?: string) =>
  app.inject({
    method: 'POST',
    url: '/plants',
    headers: { ...headers, ...json, ...(key !== undefined && { 'idempotency-key': key }) },
    payload,
  })

function suite(backend: TestBackend) {
  describe(`Idempotency-Key (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let url: string
    let dispose: () => Promise<void>
    let one: Instance
    let alice: Headers
    let aliceToo: Headers
    let bob: Headers
    let keys = 0
    const newKey = () => `key-${++keys}-${backend.name}`
    before(async () => {
      ;({ storage, url, dispose } = await freshStorage(backend, {
        migrate: true,
        limits: { ...NO_LIMITS, idempotencyKeysPerAccount: 1000 },
      }))
      one = await instanceOn(storage)
      const scopes = ['plants:read', 'plants:write', 'webhooks:manage', 'tokens:manage']
      alice = bearer((await issueToken(storage, { accountName: 'alice', scopes })).secret)
      aliceToo = bearer((await issueToken(storage, { accountName: 'alice', scopes })).secret)
      bob = bearer((await issueToken(storage, { accountName: 'bob', scopes })).secret)
    })
    after(async () => {
      await one.app.close()
      await storage.close()
      await dispose()
    })

    const post = (path: string, payload: string, headers: Headers, key?: string | string[], app = one.app) =>
      app.inject({
        method: 'POST',
        url: path,
        headers: { ...headers, ...json, ...(key !== undefined && { 'idempotency-key': key }) },
        payload,
      })
    const create = (payload: string, key?: string | string[], headers = alice, app = one.app) =>
      post('/plants', payload, headers, key, app)
    const read = (id: number, headers = alice) => one.app.inject({ method: 'GET', url: `/plants/${id}`, headers })
    const remove = (id: number) => one.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: alice })

    test('replays the first answer to a retry with the same key, marked Idempotent-Replayed, without running it again', async () => {
      const key = newKey()
      const first = await create('{"id": 1, "name": "Monstera", "tag": "tropical"}', key)
      assert.equal(first.statusCode, 200)
      assert.equal(first.headers['idempotent-replayed'], undefined)
      assert.equal((await remove(1)).statusCode, 204)
      const retry = await create('{"id": 1, "name": "Monstera", "tag": "tropical"}', key)
      assert.equal(retry.statusCode, 200)
      assert.equal(retry.body, first.body)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
      assert.match(String(retry.headers['content-type']), /^application\/json/)
      assert.equal((await read(1)).statusCode, 404, 'the retry did not create the deleted plant again')
      // Without a key the same retry runs again.
      assert.equal((await create('{"id": 1, "name": "Monstera", "tag": "tropical"}')).statusCode, 200)
      assert.equal((await read(1)).statusCode, 200)
    })

    test('takes a key quoted (a Structured Field string) or bare as the same key', async () => {
      const key = newKey()
      await create('{"id": 2, "name": "Fern"}', `"${key}"`)
      assert.equal((await remove(2)).statusCode, 204)
      const retry = await create('{"id": 2, "name": "Fern"}', key)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
      assert.equal((await read(2)).statusCode, 404)
    })

    test('reads the same request however its JSON is written', async () => {
      const key = newKey()
      await create('{"id": 3, "name": "Ivy", "tag": "climber"}', key)
      const retry = await create('{ "tag":"climber","name":"Ivy",  "id":3 }', key)
      assert.equal(retry.statusCode, 200)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
    })

    test('answers 422 (42201) to the same key with another body, and writes nothing', async () => {
      const key = newKey()
      assert.equal((await create('{"id": 4, "name": "Aloe"}', key)).statusCode, 200)
      const other = await create('{"id": 5, "name": "Basil"}', key)
      assert.equal(other.statusCode, 422)
      assert.deepEqual(other.json(), {
        error: 42201,
        message: 'Idempotency-Key: already used for a different request; use a new key for a new request',
      })
      assert.equal((await read(5)).statusCode, 404)
      assert.equal((await create('{"id": 4, "name": "Aloe", "tag": "succulent"}', key)).statusCode, 422)
    })

    test('answers 422 to the same key from another token of the account, or on another operation', async () => {
      const key = newKey()
      assert.equal((await create('{"id": 6, "name": "Mint"}', key)).statusCode, 200)
      assert.equal((await create('{"id": 6, "name": "Mint"}', key, aliceToo)).statusCode, 422)
      const hook = await post('/webhooks', '{"url": "http://127.0.0.1:9/hook"}', alice, key)
      assert.equal(hook.statusCode, 422)
      const listed = await one.app.inject({ method: 'GET', url: '/webhooks', headers: alice })
      assert.deepEqual(listed.json(), [])
    })

    test("keys are per account: another account's same key is its own", async () => {
      const key = newKey()
      assert.equal((await create('{"id": 7, "name": "Sage"}', key)).statusCode, 200)
      const bobs = await create('{"id": 7, "name": "Bob\'s sage"}', key, bob)
      assert.equal(bobs.statusCode, 200)
      assert.equal(bobs.headers['idempotent-replayed'], undefined)
      assert.equal((await read(7, bob)).body, '{"name":"Bob\'s sage"}')
    })

    test('answers 409 (40903) with Retry-After while the first request runs, then replays its answer', async () => {
      const key = newKey()
      const release = one.plants.hold()
      const first = create('{"id": 8, "name": "Thyme"}', key)
      // The first request holds its key before it reaches the held create.
      let running = await create('{"id": 8, "name": "Thyme"}', key)
      for (let i = 0; running.statusCode === 200 && i < 50; i++) {
        await sleep(10)
        running = await create('{"id": 8, "name": "Thyme"}', key)
      }
      assert.equal(running.statusCode, 409)
      assert.equal(running.headers['retry-after'], '1')
      assert.deepEqual(running.json(), {
        error: 40903,
        message: 'Idempotency-Key: its first request is still running; retry in 1 second',
      })
      release()
      assert.equal((await first).statusCode, 200)
      const retry = await create('{"id": 8, "name": "Thyme"}', key)
      assert.equal(retry.statusCode, 200)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
    })

    test('keeps a 4xx answer of the operation (a conflicting plant) and replays it', async () => {
      await create('{"id": 9, "name": "Rose"}')
      const key = newKey()
      const conflict = await create('{"id": 9, "name": "Tulip"}', key)
      assert.equal(conflict.statusCode, 409)
      assert.equal((await remove(9)).statusCode, 204)
      const retry = await create('{"id": 9, "name": "Tulip"}', key)
      assert.equal(retry.statusCode, 409)
      assert.equal(retry.body, conflict.body)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
    })

    test('frees the key after an answer of 503, so that the retry runs', async () => {
      const key = newKey()
      one.plants.failNext = true
      const failed = await expectServerError(503, () => create('{"id": 10, "name": "Lily"}', key))
      assert.equal(failed.statusCode, 503)
      const retry = await create('{"id": 10, "name": "Lily"}', key)
      assert.equal(retry.statusCode, 200)
      assert.equal(retry.headers['idempotent-replayed'], undefined)
      assert.equal((await read(10)).statusCode, 200)
    })

    test('answers 400 to a malformed key, and claims nothing', async () => {
      const malformed: Array<[string, string | string[]]> = [
        ['empty', ''],
        ['empty quotes', '""'],
        ['256 characters', 'k'.repeat(256)],
        ['a space', 'two words'],
        ['an unbalanced quote', '"open'],
        ['a backslash', 'back\\slash'],
        ['a comma', 'a,b'],
        ['sent twice', ['same', 'same']],
      ]
      for (const [what, key] of malformed) {
        const res = await create('{"id": 11, "name": "Oak"}', key)
        assert.equal(res.statusCode, 400, what)
        assert.deepEqual(
          res.json(),
          {
            error: 40001,
            message:
              'headers.idempotency-key: expected 1 to 255 visible ASCII characters other than " \\ and comma, optionally in double quotes, sent once',
          },
          what,
        )
      }
      assert.equal((await read(11)).statusCode, 404)
      assert.equal((await create('{"id": 11, "name": "Oak"}', 'k'.repeat(255))).statusCode, 200)
      assert.equal((await create('{"id": 12, "name": "Elm"}', `"${'~'.repeat(255)}"`)).statusCode, 200)
    })

    test('a request with an invalid body claims no key: the key stays free for the corrected request', async () => {
      const key = newKey()
      assert.equal((await create('{"id": 13}', key)).statusCode, 400)
      const fixed = await create('{"id": 13, "name": "Birch"}', key)
      assert.equal(fixed.statusCode, 200)
      assert.equal(fixed.headers['idempotent-replayed'], undefined)
    })

    test('POST /webhooks: a retry gets the same subscription and secret, and only one is made', async () => {
      const key = newKey()
      const body = '{"url": "http://127.0.0.1:9/hook", "events": ["plant.created"]}'
      const first = await post('/webhooks', body, bob, key)
      assert.equal(first.statusCode, 201)
      const retry = await post('/webhooks', body, bob, key)
      assert.equal(retry.statusCode, 201)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
      assert.equal(retry.body, first.body)
      assert.match(retry.json<{ secret: string }>().secret, /^whsec_/)
      const listed = await one.app.inject({ method: 'GET', url: '/webhooks', headers: bob })
      assert.equal(listed.json<unknown[]>().length, 1)
      await one.app.inject({ method: 'DELETE', url: `/webhooks/${first.json<{ id: string }>().id}`, headers: bob })
    })

    test('POST /tokens refuses an Idempotency-Key with 400 and makes no token', async () => {
      const before = await one.app.inject({ method: 'GET', url: '/tokens', headers: alice })
      const res = await post('/tokens', '{"scopes": ["plants:read"], "label": "keyed"}', alice, newKey())
      assert.equal(res.statusCode, 400)
      assert.equal(res.json<{ error: number }>().error, 40001)
      assert.match(res.json<{ message: string }>().message, /^headers\.idempotency-key: not accepted here; /)
      const now = await one.app.inject({ method: 'GET', url: '/tokens', headers: alice })
      assert.equal(now.json<unknown[]>().length, before.json<unknown[]>().length)
    })

    test('a kept answer is replayed after a restart, by an instance on the store opened again', async () => {
      const key = newKey()
      assert.equal((await create('{"id": 14, "name": "Cedar"}', key)).statusCode, 200)
      await one.app.close()
      await storage.close()
      storage = await openStorage(url, { migrate: false })
      one = await instanceOn(storage)
      assert.equal((await remove(14)).statusCode, 204)
      const retry = await create('{"id": 14, "name": "Cedar"}', key)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
      assert.equal((await read(14)).statusCode, 404)
    })

    test('an answer that cannot be kept still goes out as it is; the key waits out its lease', async () => {
      const key = newKey()
      one.keys.failNext = true
      const created = await create('{"id": 17, "name": "Maple"}', key)
      assert.equal(created.statusCode, 200)
      assert.equal(created.body, '{"name":"Maple"}')
      assert.equal((await read(17)).statusCode, 200)
      assert.equal((await create('{"id": 17, "name": "Maple"}', key)).statusCode, 409, 'still claimed')
    })

    if (backend.name === 'postgres') {
      test('a second instance on its own pool sees a key the first holds (409) and the answer it keeps', async () => {
        const { openStorage } = await import('../../src/storage/index.js')
        const otherStorage = await openStorage(url, { migrate: false })
        const other = await instanceOn(otherStorage)
        try {
          const key = newKey()
          const release = one.plants.hold()
          const first = create('{"id": 15, "name": "Pine"}', key)
          let running = await create('{"id": 15, "name": "Pine"}', key, alice, other.app)
          for (let i = 0; running.statusCode === 200 && i < 50; i++) {
            await sleep(10)
            running = await create('{"id": 15, "name": "Pine"}', key, alice, other.app)
          }
          assert.equal(running.statusCode, 409)
          release()
          assert.equal((await first).statusCode, 200)
          const retry = await create('{"id": 15, "name": "Pine"}', key, alice, other.app)
          assert.equal(retry.headers['idempotent-replayed'], 'true')
          assert.equal((await create('{"id": 16, "name": "Fir"}', key, alice, other.app)).statusCode, 422)
        } finally {
          await other.app.close()
          await otherStorage.close()
        }
      })
    }
  })

  describe(`Idempotency-Key and a refusal that may pass (${backend.name})`, () => {
    let t: Awaited<ReturnType<typeof freshStorage>>
    let one: Instance
    let alice: Headers
    before(async () => {
      t = await freshStorage(backend, { migrate: true, limits: { ...NO_LIMITS, plantsPerAccount: 1 } })
      one = await instanceOn(t.storage)
      alice = bearer((await issueToken(t.storage, { accountName: 'alice' })).secret)
    })
    after(async () => {
      await one.app.close()
      await t.dispose()
    })
    const create = (payload: string, key?: string) => postPlant(one.app, alice, payload, key)

    test('does not keep a 409 for the plants quota: the same key runs again once there is room', async () => {
      assert.equal((await create('{"id": 1, "name": "One"}')).statusCode, 200)
      const full = await create('{"id": 2, "name": "Two"}', 'room')
      assert.equal(full.statusCode, 409)
      assert.equal(full.json<{ error: number }>().error, 40902)
      assert.equal((await one.app.inject({ method: 'DELETE', url: '/plants/1', headers: alice })).statusCode, 204)
      const retry = await create('{"id": 2, "name": "Two"}', 'room')
      assert.equal(retry.statusCode, 200)
      assert.equal(retry.headers['idempotent-replayed'], undefined)
    })
  })

  describe(`Idempotency-Key quota and expiry (${backend.name})`, () => {
    let storage: InstrumentedStorage
    let dispose: () => Promise<void>
    let one: Instance
    let alice: Headers
    before(async () => {
      ;({ storage, dispose } = await freshStorage(backend, {
        migrate: true,
        limits: { ...NO_LIMITS, idempotencyKeysPerAccount: 1 },
      }))
      // Keys live 2 s: the test needs a key to outlive the request after it, and three files run beside this one, so
      // one request may wait hundreds of milliseconds for a core (a 300 ms life failed so on Node 26).
      one = await instanceOn(storage, { idempotency: { ttlMs: 2000, purgeEveryMs: 100 } })
      alice = bearer((await issueToken(storage, { accountName: 'alice' })).secret)
    })
    after(async () => {
      await one.app.close()
      await dispose()
    })
    const create = (payload: string, key?: string) => postPlant(one.app, alice, payload, key)

    test('an account holding its quota of keys gets 409 (40902) for a new key, until its keys expire and are purged', async () => {
      assert.equal((await create('{"id": 1, "name": "One"}', 'first')).statusCode, 200)
      const refused = await create('{"id": 2, "name": "Two"}', 'second')
      assert.equal(refused.statusCode, 409)
      assert.deepEqual(refused.json(), {
        error: 40902,
        message:
          'the account holds its quota of 1 idempotency keys; send the request without Idempotency-Key, or once older keys expire',
      })
      assert.equal((await create('{"id": 2, "name": "Two"}')).statusCode, 200, 'without a key it goes through')
      // Expired and purged: the room is back (an expired key not yet purged would still count).
      let again = refused
      // Up to 10 s, five times the keys' life: only a purge that never comes fails here.
      for (let i = 0; again.statusCode === 409 && i < 100; i++) {
        await sleep(100)
        again = await create('{"id": 3, "name": "Three"}', 'third')
      }
      assert.equal(again.statusCode, 200)
      const expired = await create('{"id": 4, "name": "Other body"}', 'first')
      assert.equal(expired.statusCode, 409, 'the room is taken by the third key')
    })
  })
}

for (const backend of backends) suite(backend)
