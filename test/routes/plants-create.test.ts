import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { parseExact } from '../helpers/json.js'

for (const backend of backends) {
  describe(`POST /plants (${backend.name})`, () => {
    let t: TestApp
    let headers: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      headers = bearer(await t.token('alice'))
    })
    after(() => t.close())

    const post = (payload: unknown, extra: Record<string, string> = {}) =>
      t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...headers, 'content-type': 'application/json', ...extra },
        payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
      })

    /** The account's plants, ids exact. */
    const list = async () => {
      const res = await t.app.inject({ method: 'GET', url: '/plants?fields=id,name,tag&limit=1000', headers })
      return parseExact(res.body) as Array<{ id: bigint; name: string; tag?: string }>
    }
    const find = async (id: bigint) => (await list()).filter((plant) => plant.id === id)

    function assertError(res: { statusCode: number; json(): unknown }, status: number, error: number, pattern: RegExp) {
      assert.equal(res.statusCode, status)
      const body = res.json() as { error: number; message: string }
      assert.deepEqual(Object.keys(body).sort(), ['error', 'message'])
      assert.equal(body.error, error)
      assert.match(body.message, pattern)
    }

    test('creates a plant and answers 200 with exactly {name, tag}', async () => {
      const res = await post({ id: 1, name: 'Monstera', tag: 'tropical' })
      assert.equal(res.statusCode, 200)
      assert.match(res.headers['content-type'] as string, /^application\/json/)
      assert.deepEqual(res.json(), { name: 'Monstera', tag: 'tropical' })
    })

    test('answers without a tag field when none was sent', async () => {
      const res = await post({ id: 2, name: 'Fern' })
      assert.equal(res.statusCode, 200)
      assert.equal(res.body, '{"name":"Fern"}')
    })

    test('keeps int64 ids exact at the edges and next to 2^53', async () => {
      const ids = ['9007199254740992', '9007199254740993', '9223372036854775807', '-9223372036854775808']
      for (const id of ids) {
        const res = await post(`{"id": ${id}, "name": "n${id}"}`)
        assert.equal(res.statusCode, 200, res.body)
      }
      const plants = await list()
      for (const id of ids)
        assert.deepEqual(
          plants.filter((plant) => plant.id === BigInt(id)),
          [{ id: BigInt(id), name: `n${id}` }],
        )
    })

    test('treats an identical re-POST as a safe retry (200) and stores one plant', async () => {
      const plant = { id: 10, name: 'Cactus', tag: 'desert' }
      assert.equal((await post(plant)).statusCode, 200)
      const again = await post(plant)
      assert.equal(again.statusCode, 200)
      assert.deepEqual(again.json(), { name: 'Cactus', tag: 'desert' })
      assert.deepEqual(await find(10n), [{ id: 10n, name: 'Cactus', tag: 'desert' }])
    })

    test('rejects the same id with a different name or tag with 409 and keeps the first', async () => {
      await post({ id: 11, name: 'Aloe', tag: 'succulent' })
      assertError(await post({ id: 11, name: 'Aloe vera', tag: 'succulent' }), 409, 40901, /id 11/)
      assertError(await post({ id: 11, name: 'Aloe' }), 409, 40901, /different/)
      assert.deepEqual(await find(11n), [{ id: 11n, name: 'Aloe', tag: 'succulent' }])
    })

    test('stores exactly one plant when fifty POSTs of one id race', async () => {
      const results = await Promise.all(Array.from({ length: 50 }, () => post({ id: 12, name: 'Ivy' })))
      assert.deepEqual(
        results.map((res) => res.statusCode),
        Array.from({ length: 50 }, () => 200),
      )
      assert.deepEqual(await find(12n), [{ id: 12n, name: 'Ivy' }])
    })

    test('lets different names race on one id: one 200, the rest 409, the winner stored', async () => {
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => post({ id: 13, name: `n${i}` })))
      const winners = results.flatMap((res, i) => (res.statusCode === 200 ? [`n${i}`] : []))
      assert.equal(winners.length, 1)
      for (const res of results.filter((res) => res.statusCode !== 200)) assertError(res, 409, 40901, /id 13/)
      assert.deepEqual(await find(13n), [{ id: 13n, name: winners[0] }])
    })

    const invalid: Array<[string, string, RegExp]> = [
      ['a fractional id', '{"id": 1.5, "name": "x"}', /body\.id/],
      ['an exponent id', '{"id": 1e3, "name": "x"}', /body\.id/],
      ['a string id', '{"id": "7", "name": "x"}', /body\.id/],
      ['an id above int64', '{"id": 9223372036854775808, "name": "x"}', /body\.id: expected an integer from/],
      ['an id below int64', '{"id": -9223372036854775809, "name": "x"}', /body\.id/],
      ['a negative zero id, as the path does', '{"id": -0, "name": "x"}', /^body\.id: expected an integer from/],
      ['a null id', '{"id": null, "name": "x"}', /body\.id/],
      ['a missing id', '{"name": "x"}', /body\.id/],
      ['a missing name', '{"id": 1}', /body\.name/],
      ['a null name', '{"id": 1, "name": null}', /body\.name/],
      ['a numeric name', '{"id": 1, "name": 5}', /body\.name/],
      ['an empty name', '{"id": 1, "name": ""}', /body\.name/],
      ['a name over 200 characters', `{"id": 1, "name": "${'a'.repeat(201)}"}`, /body\.name.*200/],
      ['a null tag', '{"id": 1, "name": "x", "tag": null}', /body\.tag/],
      ['an empty tag', '{"id": 1, "name": "x", "tag": ""}', /body\.tag/],
      ['a tag over 100 characters', `{"id": 1, "name": "x", "tag": "${'t'.repeat(101)}"}`, /body\.tag.*100/],
      ['a NUL character in the name', '{"id": 1, "name": "a\\u0000b"}', /body\.name: expected text without NUL/],
      ['an unpaired surrogate in the name', '{"id": 1, "name": "\\ud800x"}', /body\.name: .*unpaired surrogates/],
      ['a reversed surrogate pair in the tag', '{"id": 1, "name": "x", "tag": "\\udc00\\ud800"}', /body\.tag/],
      ['an unknown field', '{"id": 1, "name": "x", "color": "green"}', /body\.color/],
      ['an array body', '[{"id": 1, "name": "x"}]', /body/],
      ['a constructor field', '{"id": 1, "name": "x", "constructor": {}}', /body\.constructor/],
    ]
    for (const [what, payload, message] of invalid) {
      test(`rejects ${what} with 400 naming the field`, async () => {
        assertError(await post(payload), 400, 40001, message)
      })
    }

    test('accepts a name of exactly 200 and a tag of exactly 100 characters', async () => {
      const res = await post({ id: 20, name: 'a'.repeat(200), tag: 't'.repeat(100) })
      assert.equal(res.statusCode, 200)
    })

    test('stores and returns names beyond the Basic Multilingual Plane unchanged', async () => {
      const plant = { id: 22, name: 'Cactus 🌵 𝔉', tag: 'é\u00e9\u0301' }
      assert.equal((await post(plant)).statusCode, 200)
      assert.equal((await post(plant)).statusCode, 200)
      assert.deepEqual(await find(22n), [{ id: 22n, name: plant.name, tag: plant.tag }])
    })

    test('rejects a __proto__ key instead of polluting prototypes', async () => {
      assertError(await post('{"id": 21, "name": "x", "__proto__": {"polluted": true}}'), 400, 40001, /__proto__/)
      assert.equal(({} as Record<string, unknown>).polluted, undefined)
    })

    test('rejects arrays and objects nested deeper than 32 levels with 400 naming the limit', async () => {
      const nested = (depth: number) =>
        `{"id": 1, "name": "x", "tag": ${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`
      assertError(await post(nested(33)), 400, 40002, /^body: arrays and objects nested deeper than 32 levels$/)
      assertError(await post('['.repeat(10_000) + ']'.repeat(10_000)), 400, 40002, /nested deeper than 32 levels$/)
      // 32 levels are parsed: what is wrong then is the tag's type. Brackets inside strings do not count.
      assertError(await post(nested(32)), 400, 40001, /^body\.tag/)
      assert.equal((await post({ id: 23, name: '['.repeat(100), tag: '{'.repeat(100) })).statusCode, 200)
    })

    test('rejects malformed JSON with 400 and its own error value', async () => {
      assertError(await post('{"id": 1, "name": '), 400, 40002, /malformed JSON/)
    })

    test('rejects an empty body with 400', async () => {
      assertError(await post(''), 400, 40002, /empty/)
    })

    test('rejects duplicate keys with different values as malformed', async () => {
      assertError(await post('{"id": 1, "name": "a", "name": "b"}'), 400, 40002, /Duplicate key/)
    })

    test('rejects invalid UTF-8 with 400', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: Buffer.concat([Buffer.from('{"id": 30, "name": "'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
      })
      assertError(res, 400, 40002, /UTF-8/)
    })

    test('rejects a Content-Type other than application/json with 415', async () => {
      assertError(await post({ id: 31, name: 'x' }, { 'content-type': 'text/plain' }), 415, 41501, /application\/json/)
      assertError(
        await post({ id: 31, name: 'x' }, { 'content-type': 'application/x-www-form-urlencoded' }),
        415,
        41501,
        /Content-Type/,
      )
    })

    test('rejects application/json in a charset other than UTF-8 with 415', async () => {
      const res = await post({ id: 34, name: 'x' }, { 'content-type': 'application/json; charset=utf-16' })
      assertError(res, 415, 41501, /charset must be utf-8/)
    })

    test('rejects a compressed body (any Content-Encoding but identity) with 415 naming identity', async () => {
      for (const coding of ['gzip', 'deflate', 'br', 'identity, gzip']) {
        const res = await post({ id: 35, name: 'x' }, { 'content-encoding': coding })
        assertError(res, 415, 41502, /Content-Encoding must be identity/)
        assert.equal(res.headers['accept-encoding'], 'identity')
      }
      const zipped = await t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...headers, 'content-type': 'application/json', 'content-encoding': 'gzip' },
        payload: gzipSync('{"id": 35, "name": "x"}'),
      })
      assertError(zipped, 415, 41502, /identity/)
      assert.deepEqual(await find(35n), [], 'nothing stored')
      assert.equal((await post({ id: 35, name: 'x' }, { 'content-encoding': 'Identity' })).statusCode, 200)
    })

    test('accepts application/json with a charset parameter', async () => {
      const res = await post({ id: 32, name: 'x' }, { 'content-type': 'application/json; charset=utf-8' })
      assert.equal(res.statusCode, 200)
    })

    test('rejects a body over 64 KiB with 413', async () => {
      const payload = JSON.stringify({ id: 33, name: 'x', pad: 'p'.repeat(64 * 1024) })
      assertError(await post(payload), 413, 41301, /^body: over the 64 KiB limit$/)
      assert.deepEqual(await find(33n), [])
    })

    test('checks the token before reading the body', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json' },
        payload: '{not json',
      })
      assertError(res, 401, 40101, /Bearer/)
    })
  })
}
