import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'

for (const backend of backends) {
  describe(`DELETE /plants/{id} (${backend.name})`, () => {
    let t: TestApp
    let headers: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      headers = bearer(await t.token('alice'))
    })
    after(() => t.close())

    const create = (id: string, name = 'x') =>
      t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: `{"id": ${id}, "name": "${name}"}`,
      })
    const remove = (id: string) => t.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers })
    const names = async () =>
      (await t.app.inject({ method: 'GET', url: '/plants', headers })).json<Array<{ name: string }>>()

    test('deletes a plant with 204 and no body', async () => {
      await create('1', 'gone')
      const res = await remove('1')
      assert.equal(res.statusCode, 204)
      assert.equal(res.body, '')
      assert.equal(res.headers['content-type'], undefined)
      assert.deepEqual(await names(), [])
    })

    test('ignores a Content-Type header on a DELETE, and a body that is not JSON with it', async () => {
      const sent = [
        ['text/plain', undefined],
        ['application/octet-stream', undefined],
        ['application/json', undefined],
        ['text/plain', 'delete it please'],
      ] as const
      for (const [i, [type, payload]] of sent.entries()) {
        await create(String(100 + i))
        const res = await t.app.inject({
          method: 'DELETE',
          url: `/plants/${100 + i}`,
          headers: { ...headers, 'content-type': type },
          ...(payload === undefined ? {} : { payload }),
        })
        assert.equal(res.statusCode, 204, `${type}: ${res.body}`)
      }
    })

    test('answers 404 for an id the account does not have', async () => {
      const res = await remove('424242')
      assert.equal(res.statusCode, 404)
      assert.deepEqual(res.json(), { error: 40401, message: 'no plant with id 424242' })
    })

    test('answers 404 on a second delete of the same id', async () => {
      await create('2')
      assert.equal((await remove('2')).statusCode, 204)
      assert.equal((await remove('2')).statusCode, 404)
    })

    test('deletes exactly the int64 id given, not its float neighbour', async () => {
      await create('9007199254740992', 'even')
      await create('9007199254740993', 'odd')
      assert.equal((await remove('9007199254740993')).statusCode, 204)
      assert.deepEqual(await names(), [{ name: 'even' }])
      assert.equal((await remove('9007199254740992')).statusCode, 204)
    })

    test('deletes the int64 extremes', async () => {
      for (const id of ['9223372036854775807', '-9223372036854775808']) {
        await create(id)
        assert.equal((await remove(id)).statusCode, 204, id)
      }
    })

    for (const id of ['abc', '1.5', '1e3', '9223372036854775808', '-9223372036854775809', '007', '-0', '%20', '0x10']) {
      test(`rejects the id "${id}" with 400 naming the path parameter`, async () => {
        const res = await remove(id)
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
