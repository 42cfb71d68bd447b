import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'

for (const backend of backends) {
  describe(`GET /plants/{id} (${backend.name})`, () => {
    let t: TestApp
    let alice: { authorization: string }
    let bob: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      alice = bearer(await t.token('alice'))
      bob = bearer(await t.token('bob'))
    })
    after(() => t.close())

    const create = (headers: { authorization: string }, body: string) =>
      t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: body,
      })
    const read = (id: string, headers = alice) => t.app.inject({ method: 'GET', url: `/plants/${id}`, headers })

    test('answers 200 with exactly the Plant, its tag only when it has one', async () => {
      await create(alice, '{"id": 1, "name": "Monstera", "tag": "tropical"}')
      await create(alice, '{"id": 2, "name": "Fern"}')
      const tagged = await read('1')
      assert.equal(tagged.statusCode, 200)
      assert.match(tagged.headers['content-type'] as string, /^application\/json/)
      assert.equal(tagged.body, '{"name":"Monstera","tag":"tropical"}')
      assert.equal((await read('2')).body, '{"name":"Fern"}')
    })

    test('answers 404 for an id the account does not have', async () => {
      const res = await read('424242')
      assert.equal(res.statusCode, 404)
      assert.deepEqual(res.json(), { error: 40401, message: 'no plant with id 424242' })
    })

    test("answers 404 for another account's plant, as for one that does not exist", async () => {
      await create(bob, '{"id": 77, "name": "Bob\'s cactus"}')
      const res = await read('77', alice)
      assert.equal(res.statusCode, 404)
      assert.deepEqual(res.json(), { error: 40401, message: 'no plant with id 77' })
      assert.equal((await read('77', bob)).body, '{"name":"Bob\'s cactus"}')
    })

    test('answers 404 once the plant is deleted', async () => {
      await create(alice, '{"id": 3, "name": "brief"}')
      assert.equal((await t.app.inject({ method: 'DELETE', url: '/plants/3', headers: alice })).statusCode, 204)
      assert.equal((await read('3')).statusCode, 404)
    })

    test('reads exactly the int64 id given, not its float neighbour', async () => {
      await create(alice, '{"id": 9007199254740992, "name": "even"}')
      await create(alice, '{"id": 9007199254740993, "name": "odd"}')
      assert.equal((await read('9007199254740993')).body, '{"name":"odd"}')
      assert.equal((await read('9007199254740992')).body, '{"name":"even"}')
    })

    test('reads the int64 extremes', async () => {
      for (const id of ['9223372036854775807', '-9223372036854775808']) {
        await create(alice, `{"id": ${id}, "name": "edge ${id}"}`)
        assert.equal((await read(id)).body, `{"name":"edge ${id}"}`, id)
      }
    })

    for (const id of ['abc', '1.5', '1e3', '9223372036854775808', '-9223372036854775809', '007', '-0', '%20', '0x10']) {
      test(`rejects the id "${id}" with 400 naming the path parameter`, async () => {
        const res = await read(id)
        assert.equal(res.statusCode, 400)
        assert.equal(res.json().error, 40001)
        assert.match(
          res.json().message,
          /^path\.id: expected an integer from -9223372036854775808 to 9223372036854775807$/,
        )
      })
    }
  })
}
