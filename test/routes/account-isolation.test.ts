import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'

for (const backend of backends) {
  describe(`account isolation (${backend.name})`, () => {
    let t: TestApp
    let alice: { authorization: string }
    let bob: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      alice = bearer(await t.token('alice'))
      bob = bearer(await t.token('bob'))
    })
    after(() => t.close())

    const post = (headers: Record<string, string>, payload: object) =>
      t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: JSON.stringify(payload),
      })
    const list = async (headers: Record<string, string>) =>
      (await t.app.inject({ method: 'GET', url: '/plants', headers })).json()

    test('lets two accounts each own a plant with the same id', async () => {
      assert.equal((await post(alice, { id: 7, name: 'Rose' })).statusCode, 200)
      assert.equal((await post(bob, { id: 7, name: 'Tulip' })).statusCode, 200)
      assert.deepEqual(await list(alice), [{ name: 'Rose' }])
      assert.deepEqual(await list(bob), [{ name: 'Tulip' }])
    })

    test('lists only the caller account’s plants', async () => {
      await post(alice, { id: 8, name: 'Lily', tag: 'secret' })
      const bobs = await t.app.inject({ method: 'GET', url: '/plants?tag=secret', headers: bob })
      assert.deepEqual(bobs.json(), [])
    })

    test('answers 404 when deleting another account’s plant, and leaves it in place', async () => {
      await post(alice, { id: 9, name: 'Orchid' })
      const res = await t.app.inject({ method: 'DELETE', url: '/plants/9', headers: bob })
      assert.equal(res.statusCode, 404)
      assert.deepEqual(res.json(), { error: 40401, message: 'no plant with id 9' })
      assert.ok((await list(alice)).some((plant: { name: string }) => plant.name === 'Orchid'))
    })

    test('answers the same 404 for another account’s id as for an id nobody has', async () => {
      const theirs = await t.app.inject({ method: 'DELETE', url: '/plants/8', headers: bob })
      const nobodys = await t.app.inject({ method: 'DELETE', url: '/plants/8888', headers: bob })
      assert.equal(theirs.statusCode, nobodys.statusCode)
      assert.equal(theirs.json().error, nobodys.json().error)
      assert.equal(theirs.json().message.replace('8', 'N'), nobodys.json().message.replace('8888', 'N'))
    })

    test('does not reveal another account’s plant through a conflicting POST', async () => {
      const res = await post(bob, { id: 9, name: 'Something else' })
      assert.equal(res.statusCode, 200)
      assert.ok((await list(alice)).some((plant: { name: string }) => plant.name === 'Orchid'))
    })

    test('does not follow another account’s cursor into its plants', async () => {
      const page = await t.app.inject({ method: 'GET', url: '/plants?limit=1', headers: alice })
      const next = /^<([^>]+)>/.exec(page.headers.link as string)?.[1]
      assert.ok(next)
      const res = await t.app.inject({ method: 'GET', url: next, headers: bob })
      const names = res.json().map((plant: { name: string }) => plant.name)
      assert.ok(!names.includes('Lily') && !names.includes('Orchid'), names.join())
    })
  })
}
