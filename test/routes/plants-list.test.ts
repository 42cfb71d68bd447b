import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { issueToken } from '../../src/auth/issue-token.js'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { parseExact } from '../helpers/json.js'
import { plantCreated } from '../../src/webhooks/events.js'

/** The target of a `Link: <...>; rel="next"` header, or undefined. */
function nextLink(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined
  return /^<([^>]+)>; rel="next"$/.exec(header)?.[1]
}

for (const backend of backends) {
  describe(`GET /plants (${backend.name})`, () => {
    let t: TestApp
    let headers: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      const { secret, token } = await issueToken(t.storage, { accountName: 'alice' })
      headers = bearer(secret)
      // 250 plants inserted in a scrambled order; every third one tagged.
      for (let i = 0; i < 250; i++) {
        const id = (i * 97) % 250
        await t.storage.plants.create(
          token.accountId,
          {
            id: BigInt(id),
            name: `plant-${id}`,
            tag: id % 3 === 0 ? 'three' : null,
          },
          plantCreated,
        )
      }
    })
    after(() => t.close())

    const get = (url: string, h: Record<string, string> = headers) => t.app.inject({ method: 'GET', url, headers: h })

    test('answers an array of exactly {name, tag?} by default, in ascending id order', async () => {
      const res = await get('/plants?limit=4')
      assert.equal(res.statusCode, 200)
      assert.deepEqual(res.json(), [
        { name: 'plant-0', tag: 'three' },
        { name: 'plant-1' },
        { name: 'plant-2' },
        { name: 'plant-3', tag: 'three' },
      ])
    })

    test('returns 100 plants when no limit is given', async () => {
      const res = await get('/plants')
      assert.equal(res.json<unknown[]>().length, 100)
    })

    test('returns at most limit plants, up to 1000', async () => {
      assert.equal((await get('/plants?limit=1')).json<unknown[]>().length, 1)
      assert.equal((await get('/plants?limit=1000')).json<unknown[]>().length, 250)
    })

    test('walks every plant exactly once by following rel="next" links', async () => {
      const seen: bigint[] = []
      let url: string | undefined = '/plants?limit=60&fields=id,name'
      let pages = 0
      while (url !== undefined) {
        const res = await get(url)
        assert.equal(res.statusCode, 200)
        seen.push(...(parseExact(res.body) as Array<{ id: bigint }>).map((plant) => plant.id))
        url = nextLink(res.headers.link)
        pages++
      }
      assert.equal(pages, 5)
      assert.deepEqual(
        seen,
        Array.from({ length: 250 }, (_, i) => BigInt(i)),
      )
    })

    test('sends no Link header on the last page', async () => {
      const res = await get('/plants?limit=250')
      assert.equal(res.json<unknown[]>().length, 250)
      assert.equal(res.headers.link, undefined)
    })

    test('filters by exact tag, and the next link keeps the filter', async () => {
      const first = await get('/plants?tag=three&limit=50&fields=id,tag,name')
      const items = parseExact(first.body) as Array<{ id: bigint; tag: string }>
      assert.equal(items.length, 50)
      assert.ok(items.every((plant) => plant.tag === 'three' && plant.id % 3n === 0n))
      const next = nextLink(first.headers.link)
      assert.ok(next?.includes('tag=three'))
      const rest = parseExact((await get(next!)).body) as Array<{ id: bigint }>
      assert.equal(rest.length, 84 - 50)
      assert.equal(rest[0]?.id, 150n)
    })

    test('adds the id to each item when fields asks for it', async () => {
      const res = await get('/plants?limit=2&fields=id,name,tag')
      assert.deepEqual(parseExact(res.body), [
        { id: 0n, name: 'plant-0', tag: 'three' },
        { id: 1n, name: 'plant-1' },
      ])
    })

    test('leaves out the tag when fields does not ask for it', async () => {
      const res = await get('/plants?limit=1&fields=name')
      assert.deepEqual(res.json(), [{ name: 'plant-0' }])
    })

    test('lists nothing for an account without plants', async () => {
      const other = bearer(await t.token('bob'))
      const res = await get('/plants', other)
      assert.equal(res.statusCode, 200)
      assert.deepEqual(res.json(), [])
    })

    const invalid: Array<[string, string, RegExp]> = [
      ['limit=0', '/plants?limit=0', /querystring\.limit/],
      ['limit=1001', '/plants?limit=1001', /querystring\.limit.*1000/],
      ['limit=-1', '/plants?limit=-1', /querystring\.limit/],
      ['limit=abc', '/plants?limit=abc', /querystring\.limit/],
      ['limit=1.5', '/plants?limit=1.5', /querystring\.limit/],
      ['an empty limit', '/plants?limit=', /querystring\.limit/],
      ['a repeated limit', '/plants?limit=1&limit=2', /querystring\.limit/],
      ['a cursor this server did not make', '/plants?cursor=bm90LWEtY3Vyc29y', /querystring\.cursor/],
      ['a cursor with bad characters', '/plants?cursor=a%2Bb', /querystring\.cursor/],
      ['an empty tag', '/plants?tag=', /querystring\.tag/],
      ['a NUL character in the tag', '/plants?tag=a%00b', /querystring\.tag: expected text without NUL/],
      ['an unknown field in fields', '/plants?fields=id,color', /querystring\.fields/],
      ['fields without name', '/plants?fields=id', /querystring\.fields: must include name/],
      ['an unknown parameter', '/plants?limt=5', /querystring\.limt/],
      ['a __proto__ parameter, like any unknown one', '/plants?__proto__=1', /^querystring\.__proto__: /],
      ['broken percent-encoding in a value', '/plants?tag=%FF', /^querystring\.tag: malformed percent-encoding$/],
      ['a truncated percent-escape in a value', '/plants?limit=5&tag=a%2', /^querystring\.tag: malformed/],
      ['broken percent-encoding in a name', '/plants?%E0%A4=1', /^querystring\.%E0%A4: malformed/],
    ]
    for (const [what, url, message] of invalid) {
      test(`rejects ${what} with 400 naming the parameter`, async () => {
        const res = await get(url)
        assert.equal(res.statusCode, 400)
        assert.equal(res.json().error, 40001)
        assert.match(res.json().message, message)
      })
    }
  })
}
