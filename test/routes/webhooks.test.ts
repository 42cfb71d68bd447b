import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { bearer, buildTestApp, checkEveryResponse, type TestApp } from '../helpers/app.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { testOnce } from '../helpers/once.js'

// A public address, never connected to: no dispatcher runs in these tests.
const PUBLIC_URL = 'https://8.8.8.8/hooks/plants'

for (const backend of backends) {
  describe(`webhook subscriptions over HTTP (${backend.name})`, () => {
    let t: TestApp
    let alice: { authorization: string }
    let bob: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      alice = bearer(await t.token('alice', { scopes: ['webhooks:manage'] }))
      bob = bearer(await t.token('bob', { scopes: ['webhooks:manage', 'plants:read'] }))
    })
    after(() => t.close())

    const subscribe = (headers: Record<string, string>, body: unknown) =>
      t.app.inject({
        method: 'POST',
        url: '/webhooks',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      })
    const list = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/webhooks', headers })

    test('subscribes with 201, both event types by default, and shows the signing secret only then', async () => {
      const res = await subscribe(alice, { url: PUBLIC_URL })
      assert.equal(res.statusCode, 201, res.body)
      const created = res.json()
      assert.match(created.id, /^whk_[0-9a-f]{16}$/)
      assert.deepEqual(created.events, ['plant.created', 'plant.deleted'])
      assert.match(created.secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
      const listed = await list(alice)
      assert.equal(listed.statusCode, 200)
      assert.deepEqual(listed.json(), [
        {
          id: created.id,
          url: PUBLIC_URL,
          events: created.events,
          createdAt: created.createdAt,
          status: 'active',
          disabledReason: null,
          disabledAt: null,
          queued: 0,
          failingSince: null,
        },
      ])
      assert.ok(!listed.body.includes(created.secret.slice(6)))
    })

    // The next test lists and removes the subscription this one makes: it runs once, here or first in that test.
    const bobSubscribed = testOnce('subscribes to the event types asked for', async () => {
      const res = await subscribe(bob, { url: PUBLIC_URL, events: ['plant.deleted'] })
      assert.equal(res.statusCode, 201)
      assert.deepEqual(res.json().events, ['plant.deleted'])
    })

    test('lists and removes only the caller account’s subscriptions', async () => {
      await bobSubscribed()
      const bobs = (await list(bob)).json() as Array<{ id: string }>
      assert.equal(bobs.length, 1)
      const theirs = await t.app.inject({ method: 'DELETE', url: `/webhooks/${bobs[0]!.id}`, headers: alice })
      assert.equal(theirs.statusCode, 404)
      assert.equal(theirs.json().error, 40403)
      assert.equal((await list(bob)).json().length, 1)
      const own = await t.app.inject({ method: 'DELETE', url: `/webhooks/${bobs[0]!.id}`, headers: bob })
      assert.equal(own.statusCode, 204)
      assert.equal(own.body, '')
      assert.deepEqual((await list(bob)).json(), [])
      assert.equal(
        (await t.app.inject({ method: 'DELETE', url: `/webhooks/${bobs[0]!.id}`, headers: bob })).statusCode,
        404,
      )
    })

    const notPublic = /^body\.url: must name a host that resolves to public addresses only$/
    const invalid: Array<[string, unknown, RegExp]> = [
      ['a private address', { url: 'http://127.0.0.1:8080/hook' }, notPublic],
      ['a link-local address (cloud metadata)', { url: 'http://169.254.169.254/latest' }, notPublic],
      ['localhost by name', { url: 'http://localhost/hook' }, notPublic],
      ['a documentation address (192.0.2.0/24)', { url: 'https://192.0.2.1/hook' }, notPublic],
      ['a documentation address (198.51.100.0/24)', { url: 'https://198.51.100.7/hook' }, notPublic],
      ['a documentation address (203.0.113.0/24)', { url: 'https://203.0.113.10/hook' }, notPublic],
      ['an IPv6 documentation address (2001:db8::/32)', { url: 'https://[2001:db8::1]/hook' }, notPublic],
      ['an IPv6 documentation address (3fff::/20)', { url: 'https://[3fff::1]/hook' }, notPublic],
      ['another scheme', { url: 'ftp://8.8.8.8/x' }, /http or https/],
      ['credentials in the URL', { url: 'https://u:p@8.8.8.8/x' }, /credentials/],
      ['text that is not a URL', { url: 'hook' }, /not a URL/],
      ['an unknown event type', { url: PUBLIC_URL, events: ['plant.updated'] }, /events/],
      ['an empty event list', { url: PUBLIC_URL, events: [] }, /events/],
      ['a repeated event type', { url: PUBLIC_URL, events: ['plant.created', 'plant.created'] }, /events/],
      ['an unknown field', { url: PUBLIC_URL, secret: 'mine' }, /secret|additional/],
      ['no url', {}, /url/],
    ]
    for (const [what, body, message] of invalid) {
      test(`refuses ${what} with 400 naming the field`, async () => {
        const res = await subscribe(alice, body)
        assert.equal(res.statusCode, 400, res.body)
        assert.equal(res.json().error, 40001)
        assert.match(res.json().message, message)
      })
    }

    // Stored as sent, these would reach the operator's terminal through `plantstore webhooks list` (ESC starts an
    // escape sequence, CR LF forges a row) or fail to be stored at all (NUL on PostgreSQL, a lone surrogate).
    const controlled: Array<[string, string]> = [
      ['an ESC character', `${PUBLIC_URL}/\u001b[2J`],
      ['a CR LF pair', `${PUBLIC_URL}\r\nwhk_0000000000000000  forged`],
      ['a NUL character', `${PUBLIC_URL}?a=\u0000`],
      ['a tab', `${PUBLIC_URL}\tx`],
      ['a DEL character', `${PUBLIC_URL}/\u007f`],
      ['a C1 control character (CSI)', `${PUBLIC_URL}/\u009b31m`],
      ['a lone surrogate', `${PUBLIC_URL}/\ud800`],
    ]
    for (const [what, url] of controlled) {
      test(`refuses a URL with ${what} with 400 in the Error shape on ${backend.name}, storing nothing`, async () => {
        const mallory = bearer(await t.token('mallory', { scopes: ['webhooks:manage'] }))
        const res = await subscribe(mallory, { url })
        assert.equal(res.statusCode, 400, res.body)
        assert.deepEqual(res.json(), {
          error: 40001,
          message:
            'body.url: expected text without control characters (U+0000 to U+001F, U+007F to U+009F) or unpaired surrogates',
        })
        assert.deepEqual((await list(mallory)).json(), [])
      })
    }

    test(`keeps a URL with non-ASCII text and a character beyond U+FFFF exactly as sent on ${backend.name}`, async () => {
      const url = `${PUBLIC_URL}/plänts/\u{1f331}?name=Monstera\u00a0deliciosa`
      const trent = bearer(await t.token('trent', { scopes: ['webhooks:manage'] }))
      const res = await subscribe(trent, { url })
      assert.equal(res.statusCode, 201, res.body)
      assert.equal(res.json().url, url)
      assert.deepEqual(
        (await list(trent)).json().map((subscription: { url: string }) => subscription.url),
        [url],
      )
    })

    test('answers byte-identical bodies for a host that does not resolve and one that resolves to loopback, naming no address', async () => {
      // RFC 6761: a name under .invalid never resolves; localhost resolves to 127.0.0.1 from /etc/hosts.
      const unresolvable = await subscribe(alice, { url: 'https://nothing.invalid/hook' })
      const loopback = await subscribe(alice, { url: 'https://localhost/hook' })
      assert.equal(unresolvable.statusCode, 400, unresolvable.body)
      assert.equal(loopback.statusCode, 400, loopback.body)
      assert.equal(unresolvable.body, loopback.body)
      assert.deepEqual(loopback.json(), {
        error: 40001,
        message: 'body.url: must name a host that resolves to public addresses only',
      })
      assert.doesNotMatch(loopback.body, /127\.0\.0\.1|::1/)
    })

    test('refuses a malformed subscription id with 400', async () => {
      const res = await t.app.inject({ method: 'DELETE', url: '/webhooks/whk_nope', headers: alice })
      assert.equal(res.statusCode, 400)
    })

    test('needs the webhooks:manage scope, which plant tokens do not have by default', async () => {
      const plantsOnly = bearer(await t.token('carol'))
      for (const res of [await subscribe(plantsOnly, { url: PUBLIC_URL }), await list(plantsOnly)]) {
        assert.equal(res.statusCode, 403)
        assert.equal(res.json().error, 40301)
        assert.match(String(res.headers['www-authenticate']), /scope="webhooks:manage"/)
      }
      assert.equal((await t.app.inject({ method: 'GET', url: '/webhooks' })).statusCode, 401)
    })
  })
}

describe('webhook subscriptions refused for their host, in the server log', () => {
  const lines: Array<Record<string, unknown>> = []
  let app: FastifyInstance
  let secret: string
  let dispose: () => Promise<void>
  before(async () => {
    const fresh = await freshStorage(backends[0]!)
    dispose = fresh.dispose
    secret = (await issueToken(fresh.storage, { accountName: 'alice', scopes: ['webhooks:manage'] })).secret
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>)
        done()
      },
    })
    app = checkEveryResponse(await buildApp({ storage: fresh.storage, logger: { level: 'info', stream } }))
  })
  after(async () => {
    await app.close()
    await dispose()
  })

  async function refusal(url: string, reqId: string): Promise<Record<string, unknown>> {
    const res = await app.inject({
      method: 'POST',
      url: '/webhooks',
      headers: { ...bearer(secret), 'content-type': 'application/json', 'x-request-id': reqId },
      payload: JSON.stringify({ url }),
    })
    assert.equal(res.statusCode, 400, res.body)
    const line = lines.find((entry) => entry.reqId === reqId && entry.msg === 'webhook URL refused')
    assert.ok(line !== undefined, `a refusal line for ${reqId} in ${JSON.stringify(lines)}`)
    return line
  }

  test('says at info level which: no such host, or the private address it resolves to, never the path or query', async () => {
    const unresolvable = await refusal('https://nothing.invalid/hook?key=receiver-secret', 'refused-1')
    const loopback = await refusal('https://localhost/hook?key=receiver-secret', 'refused-2')
    assert.equal(unresolvable.level, 30)
    assert.equal(loopback.level, 30)
    assert.match(String(unresolvable.reason), /^host nothing\.invalid does not resolve \(/)
    assert.equal(loopback.reason, 'host localhost resolves to 127.0.0.1, which is not a public address')
    assert.ok(!JSON.stringify(lines).includes('receiver-secret'), 'no URL query in the log')
  })
})
