import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'

const DAY_MS = 86_400_000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

for (const backend of backends) {
  describe(`token self-service (${backend.name})`, () => {
    let t: TestApp
    let manager: { authorization: string }
    // A short token cache, so that "refused within the bound" takes a moment in the test, not the default 2 s.
    const TTL_MS = 200
    before(async () => {
      t = await buildTestApp(backend, TTL_MS, undefined, { tokensPerAccount: 3 })
      manager = bearer(await t.token('alice', { scopes: ['plants:read', 'plants:write', 'tokens:manage'] }))
    })
    after(() => t.close())

    const create = (headers: Record<string, string>, payload: object) =>
      t.app.inject({
        method: 'POST',
        url: '/tokens',
        headers: { ...headers, 'content-type': 'application/json' },
        payload,
      })
    const plants = (token: string) => t.app.inject({ method: 'GET', url: '/plants', headers: bearer(token) })
    const removeAll = async () => {
      for (const token of (await t.app.inject({ method: 'GET', url: '/tokens', headers: manager })).json()) {
        if (!token.scopes.includes('tokens:manage')) {
          await t.app.inject({ method: 'DELETE', url: `/tokens/${token.id}`, headers: manager })
        }
      }
    }

    test('makes a token for the caller’s own account that works at once, shown once with its secret', async () => {
      await t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...manager, 'content-type': 'application/json' },
        payload: { id: 1, name: 'Monstera' },
      })
      const res = await create(manager, { scopes: ['plants:read'], label: 'dashboard' })
      assert.equal(res.statusCode, 201, res.body)
      const made = res.json()
      assert.match(made.secret, /^pst_/)
      assert.deepEqual(made.scopes, ['plants:read'])
      assert.equal(made.label, 'dashboard')
      assert.equal(made.revokedAt, null)
      const lifetime = Date.parse(made.expiresAt) - Date.parse(made.createdAt)
      assert.ok(Math.abs(lifetime - 90 * DAY_MS) < 60_000, `expires after ${lifetime} ms, not 90 days`)
      const listed = await plants(made.secret)
      assert.equal(listed.statusCode, 200)
      assert.deepEqual(listed.json(), [{ name: 'Monstera' }], 'the caller’s account, not another')
      await removeAll()
    })

    test('answers 403 insufficient_scope for a scope the caller lacks', async () => {
      const res = await create(manager, { scopes: ['plants:read', 'webhooks:manage'] })
      assert.equal(res.statusCode, 403)
      assert.equal(
        res.headers['www-authenticate'],
        'Bearer realm="plantstore", error="insufficient_scope", scope="webhooks:manage"',
      )
      assert.deepEqual(res.json(), {
        error: 40301,
        message: 'a token can only be given scopes the calling token has; it lacks webhooks:manage',
      })
    })

    test('has no way to name another account: an account field is refused with 400', async () => {
      const res = await create(manager, { scopes: ['plants:read'], account: 'bob' })
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().error, 40001)
      assert.equal((await t.storage.tokens.list('bob')).length, 0)
    })

    test('refuses an expiry in the past or more than 366 days ahead, and bad bodies, with 400', async () => {
      const bodies = [
        { scopes: ['plants:read'], expiresAt: new Date(Date.now() - 1000).toISOString() },
        { scopes: ['plants:read'], expiresAt: new Date(Date.now() + 367 * DAY_MS).toISOString() },
        { scopes: ['plants:read'], expiresAt: 'tomorrow' },
        { scopes: ['plants:read'], expiresAt: '2027-02-30T00:00:00Z' },
        { scopes: [] },
        { scopes: ['plants:admin'] },
        { scopes: ['plants:read', 'plants:read'] },
        { scopes: ['plants:read'], label: 'line\nbreak' },
        { scopes: ['plants:read'], label: 'x'.repeat(101) },
        {},
      ]
      for (const body of bodies) {
        const res = await create(manager, body)
        assert.equal(res.statusCode, 400, JSON.stringify(body))
        assert.equal(res.json().error, 40001)
      }
      const within = await create(manager, {
        scopes: ['plants:read'],
        expiresAt: new Date(Date.now() + 365 * DAY_MS).toISOString(),
      })
      assert.equal(within.statusCode, 201, within.body)
      await removeAll()
    })

    test('lists the account’s tokens without any secret', async () => {
      const made = (await create(manager, { scopes: ['plants:read'], label: 'ci' })).json()
      await t.token('bob', { scopes: ['plants:read'] })
      const res = await t.app.inject({ method: 'GET', url: '/tokens', headers: manager })
      assert.equal(res.statusCode, 200)
      const tokens = res.json() as Array<Record<string, unknown>>
      assert.deepEqual(
        tokens.map((token) => token.label),
        [null, 'ci'],
        'the caller’s own two (the first from the CLI, without label), not bob’s',
      )
      assert.ok(tokens.every((token) => !('secret' in token)))
      assert.ok(!res.body.includes(made.secret.slice(4)))
      await removeAll()
    })

    test('deletes a token: it is refused within the token cache bound, and no longer listed', async () => {
      const made = (await create(manager, { scopes: ['plants:read'] })).json()
      assert.equal((await plants(made.secret)).statusCode, 200)
      const res = await t.app.inject({ method: 'DELETE', url: `/tokens/${made.id}`, headers: manager })
      assert.equal(res.statusCode, 204)
      await sleep(TTL_MS + 50)
      const refused = await plants(made.secret)
      assert.equal(refused.statusCode, 401)
      assert.equal(refused.headers['www-authenticate'], 'Bearer realm="plantstore", error="invalid_token"')
      const listed = (await t.app.inject({ method: 'GET', url: '/tokens', headers: manager })).json()
      assert.ok(!listed.some((token: { id: string }) => token.id === made.id))
      const again = await t.app.inject({ method: 'DELETE', url: `/tokens/${made.id}`, headers: manager })
      assert.equal(again.statusCode, 404)
    })

    test('answers 404 for another account’s token, which keeps working', async () => {
      const bobs = await t.token('bob', { scopes: ['plants:read', 'tokens:manage'] })
      const bobsId = (await t.app.inject({ method: 'GET', url: '/tokens', headers: bearer(bobs) })).json()[0].id
      const res = await t.app.inject({ method: 'DELETE', url: `/tokens/${bobsId}`, headers: manager })
      assert.equal(res.statusCode, 404)
      assert.deepEqual(res.json(), { error: 40404, message: `no token with id ${bobsId}` })
      await sleep(TTL_MS + 50)
      assert.equal((await plants(bobs)).statusCode, 200)
    })

    test('never makes a token that outlives the calling one: the default stops at its expiry, a later one is 400', async () => {
      const expiresAt = new Date(Date.now() + 3_600_000)
      const shortLived = bearer(await t.token('alice', { scopes: ['plants:read', 'tokens:manage'], expiresAt }))
      const made = await create(shortLived, { scopes: ['plants:read'] })
      assert.equal(made.statusCode, 201, made.body)
      assert.equal(made.json().expiresAt, expiresAt.toISOString())
      const later = await create(shortLived, {
        scopes: ['plants:read'],
        expiresAt: new Date(expiresAt.getTime() + 1000).toISOString(),
      })
      assert.equal(later.statusCode, 400)
      assert.deepEqual(later.json(), {
        error: 40001,
        message: `body.expiresAt: must not be after the calling token expires (${expiresAt.toISOString()})`,
      })
      await removeAll()
      // The short-lived manager too, so that the quota test below counts from one.
      const own = (await t.storage.tokens.list('alice')).find(
        (token) => token.expiresAt?.getTime() === expiresAt.getTime(),
      )
      await t.storage.tokens.revoke(own!.id)
    })

    test('answers 403 for deleting a token with a scope the caller lacks, and leaves it working', async () => {
      const writerToken = await t.token('alice', { scopes: ['plants:read', 'webhooks:manage'] })
      const writer = (await t.app.inject({ method: 'GET', url: '/tokens', headers: manager }))
        .json()
        .find((token: { scopes: string[] }) => token.scopes.includes('webhooks:manage'))
      const res = await t.app.inject({ method: 'DELETE', url: `/tokens/${writer.id}`, headers: manager })
      assert.equal(res.statusCode, 403)
      assert.equal(
        res.headers['www-authenticate'],
        'Bearer realm="plantstore", error="insufficient_scope", scope="webhooks:manage"',
      )
      await sleep(TTL_MS + 50)
      assert.equal((await plants(writerToken)).statusCode, 200)
      await t.storage.tokens.revoke(writer.id)
    })

    test('answers 400 for a malformed token id', async () => {
      const res = await t.app.inject({ method: 'DELETE', url: '/tokens/pst_secret', headers: manager })
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().error, 40001)
    })

    test('stops at the quota of tokens not revoked with 409, and makes room when one is deleted', async () => {
      // The manager's own token is one of the three.
      const made = [
        await create(manager, { scopes: ['plants:read'] }),
        await create(manager, { scopes: ['plants:read'] }),
      ]
      assert.deepEqual(
        made.map((res) => res.statusCode),
        [201, 201],
      )
      const over = await create(manager, { scopes: ['plants:read'] })
      assert.equal(over.statusCode, 409)
      assert.deepEqual(over.json(), {
        error: 40902,
        message: 'the account holds its quota of 3 tokens not revoked; delete one before creating another',
      })
      await t.app.inject({ method: 'DELETE', url: `/tokens/${made[0]!.json().id}`, headers: manager })
      assert.equal((await create(manager, { scopes: ['plants:read'] })).statusCode, 201)
      await removeAll()
    })

    test('answers 403 to a token without tokens:manage, on every token route', async () => {
      const plain = bearer(await t.token('alice', { scopes: ['plants:read', 'plants:write'] }))
      for (const [method, url] of [
        ['POST', '/tokens'],
        ['GET', '/tokens'],
        ['DELETE', '/tokens/tok_0123456789abcdef'],
      ] as const) {
        const res = await t.app.inject({
          method,
          url,
          headers: { ...plain, 'content-type': 'application/json' },
          ...(method === 'POST' && { payload: { scopes: ['plants:read'] } }),
        })
        assert.equal(res.statusCode, 403, `${method} ${url}`)
        assert.match(String(res.headers['www-authenticate']), /scope="tokens:manage"/)
      }
    })
  })
}

for (const backend of backends) {
  describe(`token lineage over HTTP (${backend.name})`, () => {
    let t: TestApp
    let root: { authorization: string }
    let rootId: string
    const TTL_MS = 200
    const MANAGER = ['plants:read', 'tokens:manage']
    before(async () => {
      t = await buildTestApp(backend, TTL_MS)
      root = bearer(await t.token('lineage', { scopes: MANAGER }))
      rootId = (await t.storage.tokens.list('lineage'))[0]!.id
    })
    after(() => t.close())

    const make = async (headers: Record<string, string>, scopes = MANAGER) => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/tokens',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: { scopes },
      })
      assert.equal(res.statusCode, 201, res.body)
      const made = res.json() as { id: string; secret: string; createdBy: string | null }
      return { ...made, headers: bearer(made.secret) }
    }
    const plants = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/plants', headers })
    const remove = (headers: Record<string, string>, id: string) =>
      t.app.inject({ method: 'DELETE', url: `/tokens/${id}`, headers })

    test('GET /tokens shows which token made each: the calling token’s id, null for one made with the CLI', async () => {
      const m = await make(root)
      const c = await make(m.headers, ['plants:read'])
      assert.equal(m.createdBy, rootId)
      assert.equal(c.createdBy, m.id)
      const listed = (await t.app.inject({ method: 'GET', url: '/tokens', headers: root })).json() as Array<{
        id: string
        createdBy: string | null
      }>
      const makers = new Map(listed.map((token) => [token.id, token.createdBy]))
      assert.equal(makers.get(rootId), null)
      assert.equal(makers.get(m.id), rootId)
      assert.equal(makers.get(c.id), m.id)
    })

    test('deleting a token ends the tokens it made, and theirs, within the token cache bound: 401 revoked', async () => {
      const m = await make(root)
      const c = await make(m.headers)
      const g = await make(c.headers, ['plants:read'])
      for (const token of [m, c, g]) assert.equal((await plants(token.headers)).statusCode, 200)
      assert.equal((await remove(root, m.id)).statusCode, 204)
      await sleep(TTL_MS + 50)
      for (const token of [m, c, g]) {
        const refused = await plants(token.headers)
        assert.equal(refused.statusCode, 401, `${token.id}: ${refused.body}`)
        assert.equal(refused.headers['www-authenticate'], 'Bearer realm="plantstore", error="invalid_token"')
      }
      assert.match((await plants(c.headers)).json().message, /revoked/)
      assert.equal((await plants(root)).statusCode, 200, 'the maker of the deleted token keeps working')
      const listed = (await t.app.inject({ method: 'GET', url: '/tokens', headers: root })).json()
      assert.ok(!listed.some((token: { id: string }) => [m.id, c.id, g.id].includes(token.id)), 'none listed')
    })

    test('answers 401 revoked to a token making one in the moment after its deletion, while still trusted', async () => {
      const m = await make(root)
      assert.equal((await plants(m.headers)).statusCode, 200)
      assert.equal((await remove(root, m.id)).statusCode, 204)
      // M is still trusted from the cache for up to TTL_MS, but what it would make is not stored.
      const late = await t.app.inject({
        method: 'POST',
        url: '/tokens',
        headers: { ...m.headers, 'content-type': 'application/json' },
        payload: { scopes: ['plants:read'] },
      })
      assert.equal(late.statusCode, 401, late.body)
      assert.equal(late.headers['www-authenticate'], 'Bearer realm="plantstore", error="invalid_token"')
      assert.deepEqual(late.json(), { error: 40102, message: 'bearer token has been revoked' })
      const listed = (await t.app.inject({ method: 'GET', url: '/tokens', headers: root })).json()
      assert.ok(!listed.some((token: { createdBy: string | null }) => token.createdBy === m.id), 'nothing made by M')
    })
  })
}
