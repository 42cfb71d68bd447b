import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { JwksServer, signingKey } from '../helpers/jwks-server.js'

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
    // Alice's plants as the first tests leave them, for the tests that look for them: an identical re-POST is a safe
    // retry, so in the file this changes nothing, and a test run alone (--test-name-pattern) finds them all the same.
    const alicesPlants = async () => {
      for (const plant of [
        { id: 7, name: 'Rose' },
        { id: 8, name: 'Lily', tag: 'secret' },
        { id: 9, name: 'Orchid' },
      ])
        assert.equal((await post(alice, plant)).statusCode, 200)
    }

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
      await alicesPlants()
      const theirs = await t.app.inject({ method: 'DELETE', url: '/plants/8', headers: bob })
      const nobodys = await t.app.inject({ method: 'DELETE', url: '/plants/8888', headers: bob })
      assert.equal(theirs.statusCode, nobodys.statusCode)
      assert.equal(theirs.json().error, nobodys.json().error)
      assert.equal(theirs.json().message.replace('8', 'N'), nobodys.json().message.replace('8888', 'N'))
    })

    test('does not reveal another account’s plant through a conflicting POST', async () => {
      await alicesPlants()
      const res = await post(bob, { id: 9, name: 'Something else' })
      assert.equal(res.statusCode, 200)
      assert.ok((await list(alice)).some((plant: { name: string }) => plant.name === 'Orchid'))
    })

    test('does not follow another account’s cursor into its plants', async () => {
      await alicesPlants()
      const page = await t.app.inject({ method: 'GET', url: '/plants?limit=1', headers: alice })
      const next = /^<([^>]+)>/.exec(page.headers.link as string)?.[1]
      assert.ok(next)
      const res = await t.app.inject({ method: 'GET', url: next, headers: bob })
      const names = res.json().map((plant: { name: string }) => plant.name)
      assert.ok(!names.includes('Lily') && !names.includes('Orchid'), names.join())
    })
  })
}

// Non-interference: whatever two accounts do, interleaved, each sees exactly what it would see alone. Every
// endpoint, every answer (status, body, Link) is compared with a run of that account's requests on a store where
// the other account does not exist, so no answer can depend on the other account's plants.
type Who = 'a' | 'b'
type Op =
  | { who: Who; kind: 'create'; id: number; name: string; tag?: string }
  | { who: Who; kind: 'delete'; id: number }
  | { who: Who; kind: 'list'; limit: number; tag?: string; next: boolean }

const who = fc.constantFrom<Who>('a', 'b')
const id = fc.integer({ min: 1, max: 6 })
const tag = fc.option(fc.constantFrom('t', 'u'), { nil: undefined })
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record(
    { who, kind: fc.constant('create' as const), id, name: fc.constantFrom('x', 'y'), tag },
    { requiredKeys: ['who', 'kind', 'id', 'name'] },
  ),
  fc.record({ who, kind: fc.constant('delete' as const), id }),
  fc.record(
    { who, kind: fc.constant('list' as const), limit: fc.integer({ min: 1, max: 3 }), tag, next: fc.boolean() },
    { requiredKeys: ['who', 'kind', 'limit', 'next'] },
  ),
)

// The same property for both kinds of caller: the service's own tokens, and JWTs whose sub names the account.
const callers = ['service tokens', 'JWTs'] as const

for (const backend of backends) {
  for (const caller of callers)
    describe(`account isolation, generated interleavings, ${caller} (${backend.name})`, () => {
      let together: TestApp
      let alone: TestApp
      let jwks: JwksServer | undefined
      let mint: (t: TestApp, account: string) => Promise<string>
      before(async () => {
        if (caller === 'JWTs') {
          const key = await signingKey('k1')
          const issuer = (jwks = await JwksServer.start([key]))
          mint = (_t, account) => issuer.sign(key, { sub: account, scope: 'plants:read plants:write' })
        } else {
          mint = (t, account) => t.token(account)
        }
        together = await buildTestApp(backend, 2000, undefined, { jwt: jwks?.settings() })
        alone = await buildTestApp(backend, 2000, undefined, { jwt: jwks?.settings() })
      })
      after(async () => {
        await together.close()
        await alone.close()
        await jwks?.stop()
      })

      /** Runs `ops` on `t`, each account following the last next link it got when asked; returns what each saw. */
      async function run(t: TestApp, tokens: Record<Who, string>, ops: Op[]): Promise<Record<Who, string[]>> {
        const seen: Record<Who, string[]> = { a: [], b: [] }
        const nextLink: Partial<Record<Who, string>> = {}
        for (const o of ops) {
          const headers = bearer(tokens[o.who])
          let res
          if (o.kind === 'create') {
            const payload = JSON.stringify({ id: o.id, name: o.name, ...(o.tag && { tag: o.tag }) })
            res = await t.app.inject({
              method: 'POST',
              url: '/plants',
              headers: { ...headers, 'content-type': 'application/json' },
              payload,
            })
          } else if (o.kind === 'delete') {
            res = await t.app.inject({ method: 'DELETE', url: `/plants/${o.id}`, headers })
          } else {
            const query = `/plants?limit=${o.limit}&fields=id,name,tag${o.tag ? `&tag=${o.tag}` : ''}`
            res = await t.app.inject({ method: 'GET', url: (o.next && nextLink[o.who]) || query, headers })
            nextLink[o.who] = /^<([^>]+)>/.exec(String(res.headers.link ?? ''))?.[1]
          }
          seen[o.who].push(`${res.statusCode} ${res.headers.link ?? ''} ${res.body}`)
        }
        return seen
      }

      test('each account sees exactly what it would see alone, on every endpoint', async () => {
        let n = 0
        await fc.assert(
          fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30 }), async (ops) => {
            n++
            const both = { a: await mint(together, `a${n}`), b: await mint(together, `b${n}`) }
            const interleaved = await run(together, both, ops)
            for (const account of ['a', 'b'] as const) {
              const solo = { [account]: await mint(alone, `${account}${n}`) } as Record<Who, string>
              const own = ops.filter((o) => o.who === account)
              assert.deepEqual(interleaved[account], (await run(alone, solo, own))[account])
            }
          }),
          { numRuns: 60 },
        )
      })
    })
}
