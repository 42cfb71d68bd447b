import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { testOnce } from '../helpers/once.js'

// A public address, never connected to: no dispatcher runs in these tests.
const PUBLIC_URL = 'https://8.8.8.8/hooks/plants'

for (const backend of backends) {
  describe(`quotas and enabling over HTTP (${backend.name})`, () => {
    let t: TestApp
    let alice: { authorization: string }
    let bob: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend, 2000, {
        plantsPerAccount: 2,
        subscriptionsPerAccount: 1,
        queuedPerSubscription: 2,
        idempotencyKeysPerAccount: 0,
      })
      const scopes = ['plants:read', 'plants:write', 'webhooks:manage']
      alice = bearer(await t.token('alice', { scopes }))
      bob = bearer(await t.token('bob', { scopes }))
    })
    after(() => t.close())

    const json = (headers: Record<string, string>) => ({ ...headers, 'content-type': 'application/json' })
    const createPlant = (headers: Record<string, string>, id: number, name = 'Fern') =>
      t.app.inject({ method: 'POST', url: '/plants', headers: json(headers), payload: { id, name } })
    const subscribe = (headers: Record<string, string>) =>
      t.app.inject({ method: 'POST', url: '/webhooks', headers: json(headers), payload: { url: PUBLIC_URL } })
    const enable = (headers: Record<string, string>, id: string) =>
      t.app.inject({ method: 'POST', url: `/webhooks/${id}/enable`, headers })

    // The quota tests leave Alice with plants 1 and 2 and one subscription, which the enabling tests build on: each
    // runs once, in its own test or first in a later one that needs what it leaves.
    const plantQuota = testOnce(
      'refuses a plant past the account quota with 409 (40902); an identical re-create still answers 200',
      async () => {
        assert.equal((await createPlant(alice, 1)).statusCode, 200)
        assert.equal((await createPlant(alice, 2)).statusCode, 200)
        const refused = await createPlant(alice, 3)
        assert.equal(refused.statusCode, 409)
        assert.deepEqual(refused.json(), {
          error: 40902,
          message: 'the account holds its quota of 2 plants; delete some before creating more',
        })
        assert.equal((await createPlant(alice, 2)).statusCode, 200)
        assert.equal((await createPlant(alice, 2, 'Palm')).json().error, 40901, 'a conflict is still a conflict')
        assert.equal((await createPlant(bob, 3)).statusCode, 200, 'another account is not limited by it')
      },
    )

    const subscriptionQuota = testOnce('refuses a subscription past the account quota with 409 (40902)', async () => {
      assert.equal((await subscribe(alice)).statusCode, 201)
      const refused = await subscribe(alice)
      assert.equal(refused.statusCode, 409)
      assert.deepEqual(refused.json(), {
        error: 40902,
        message: 'the account holds its quota of 1 webhook subscriptions; remove one before adding another',
      })
    })

    test('shows a subscription disabled at its queue cap, and enables it again with POST /webhooks/{id}/enable', async () => {
      await plantQuota()
      await subscriptionQuota()
      const [subscription] = (await t.app.inject({ method: 'GET', url: '/webhooks', headers: alice })).json()
      // Alice holds plants 1 and 2: two deletes queue two events, the third change finds the queue full.
      for (const id of [1, 2]) await t.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: alice })
      assert.equal((await createPlant(alice, 1)).statusCode, 200, 'the change itself is not refused')
      const [disabled] = (await t.app.inject({ method: 'GET', url: '/webhooks', headers: alice })).json()
      assert.equal(disabled.status, 'disabled')
      assert.equal(disabled.disabledReason, 'backlog')
      assert.equal(disabled.queued, 0)
      assert.ok(!Number.isNaN(Date.parse(disabled.disabledAt)))
      const enabled = await enable(alice, subscription.id)
      assert.equal(enabled.statusCode, 200)
      assert.deepEqual(
        [enabled.json().status, enabled.json().disabledReason, enabled.json().disabledAt],
        ['active', null, null],
      )
      assert.equal((await enable(alice, subscription.id)).json().status, 'active', 'enabling an active one is harmless')
      // The route takes no body: a Content-Type a form or a tool adds is ignored, not a 415.
      const typed = await t.app.inject({
        method: 'POST',
        url: `/webhooks/${subscription.id}/enable`,
        headers: { ...alice, 'content-type': 'text/plain' },
        payload: 'please',
      })
      assert.equal(typed.statusCode, 200, typed.body)
    })

    test('enables only the caller account’s subscriptions: 404 (40403) for another’s or an unknown id', async () => {
      await subscriptionQuota()
      const [subscription] = (await t.app.inject({ method: 'GET', url: '/webhooks', headers: alice })).json()
      const theirs = await enable(bob, subscription.id)
      assert.equal(theirs.statusCode, 404)
      assert.equal(theirs.json().error, 40403)
      assert.equal((await enable(alice, 'whk_0000000000000000')).statusCode, 404)
    })

    test('refuses a malformed id with 400 and a token without webhooks:manage with 403', async () => {
      assert.equal((await enable(alice, 'nope')).json().error, 40001)
      const reader = bearer(await t.token('alice', { scopes: ['plants:read'] }))
      const forbidden = await enable(reader, 'whk_0000000000000000')
      assert.equal(forbidden.statusCode, 403)
      assert.equal(forbidden.json().error, 40301)
    })
  })
}
