import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { ErrorCatalogue } from '../../src/errors.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'

describe('public routes and cross-cutting behaviour', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(() => t.close())

  test('GET /readyz answers 200 {status: ready} without a token while the storage answers', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/readyz' })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { status: 'ready' })
  })

  test('GET /healthz answers 200 without a token', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz' })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { status: 'ok' })
  })

  test('answers an unknown route with 404 in the Error shape', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/nope?x=1' })
    assert.equal(res.statusCode, 404)
    assert.deepEqual(res.json(), { error: 40402, message: 'no route for GET /nope' })
  })

  test('answers an unsupported method on /plants with 404 in the Error shape', async () => {
    const res = await t.app.inject({ method: 'PATCH', url: '/plants' })
    assert.equal(res.statusCode, 404)
    assert.equal(res.json().error, 40402)
  })

  test('answers a URL with broken percent-encoding with 400 in the Error shape', async () => {
    for (const url of ['/plants%ZZ', '/plants/%E0%A4%A']) {
      const res = await t.app.inject({ method: 'DELETE', url })
      assert.equal(res.statusCode, 400, url)
      assert.equal(res.json().error, 40001)
      assert.deepEqual(Object.keys(res.json()).sort(), ['error', 'message'])
      assert.match(res.headers['x-request-id'] as string, /^[0-9a-f-]{36}$/)
    }
  })

  test('sends a fresh X-Request-Id on every response', async () => {
    const a = await t.app.inject({ method: 'GET', url: '/plants' })
    const b = await t.app.inject({ method: 'GET', url: '/nope' })
    assert.match(a.headers['x-request-id'] as string, /^[0-9a-f-]{36}$/)
    assert.match(b.headers['x-request-id'] as string, /^[0-9a-f-]{36}$/)
    assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id'])
  })

  test('echoes a sane incoming X-Request-Id', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'req-42.a:b_c' } })
    assert.equal(res.headers['x-request-id'], 'req-42.a:b_c')
  })

  test('replaces an incoming X-Request-Id that is too long or has unsafe characters', async () => {
    for (const incoming of ['a'.repeat(129), 'has space', 'quote"d', '<script>']) {
      const res = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': incoming } })
      assert.notEqual(res.headers['x-request-id'], incoming)
      assert.match(res.headers['x-request-id'] as string, /^[0-9a-f-]{36}$/)
    }
  })

  describe('GET /openapi.json', () => {
    let doc: {
      openapi: string
      components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> }
      paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, { content?: unknown }> }>>
      info: { description: string }
    }
    before(async () => {
      const res = await t.app.inject({ method: 'GET', url: '/openapi.json' })
      assert.equal(res.statusCode, 200)
      doc = res.json()
    })

    test('is OpenAPI 3.1 with the bearerAuth scheme', () => {
      assert.equal(doc.openapi, '3.1.0')
      assert.deepEqual(doc.components.securitySchemes.bearerAuth, { type: 'http', scheme: 'bearer' })
    })

    test('documents every status each operation can answer, errors with the Error shape', () => {
      const expected: Record<string, string[]> = {
        'post /plants': ['200', '400', '401', '403', '409', '413', '415', '429', '500', '503'],
        'get /plants': ['200', '400', '401', '403', '429', '500', '503'],
        'delete /plants/{id}': ['204', '400', '401', '403', '404', '429', '500', '503'],
      }
      for (const [operation, statuses] of Object.entries(expected)) {
        const [method, path] = operation.split(' ') as [string, string]
        const responses = doc.paths[path]?.[method]?.responses
        assert.ok(responses, operation)
        assert.deepEqual(Object.keys(responses).sort(), statuses.sort(), operation)
        for (const status of statuses.filter((s) => Number(s) >= 400)) {
          assert.deepEqual(
            responses[status]?.content,
            { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
            `${operation} ${status}`,
          )
        }
        assert.deepEqual(doc.paths[path]?.[method]?.security, [{ bearerAuth: [] }])
      }
    })

    test('documents the query parameter as limit, the id as int64, and the Plant shape without id', () => {
      const text = JSON.stringify(doc)
      assert.match(text, /"name":"limit","required":false/)
      assert.match(text, /"in":"path","name":"id","required":true/)
      assert.deepEqual(Object.keys((doc.components.schemas.Plant as { properties: object }).properties), [
        'name',
        'tag',
      ])
    })

    test('describes the plant.created and plant.deleted webhooks with their bodies and signature headers', () => {
      const hooks = (doc as unknown as { webhooks: Record<string, { post: Record<string, unknown> }> }).webhooks
      assert.deepEqual(Object.keys(hooks), ['plant.created', 'plant.deleted'])
      const created = JSON.stringify(hooks['plant.created']!.post)
      assert.match(created, /"\$ref":"#\/components\/schemas\/NewPlant"/)
      for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'plantstore-event-type']) {
        assert.match(created, new RegExp(`"name":"${header}","in":"header","required":true`))
      }
      assert.match(JSON.stringify(hooks['plant.deleted']!.post), /"required":\["id"\]/)
      assert.ok((doc.components.schemas as Record<string, unknown>).NewPlant, 'NewPlant is a component')
    })

    test('lists the whole error catalogue', () => {
      for (const entry of Object.values(ErrorCatalogue)) assert.ok(doc.info.description.includes(`| ${entry.error} |`))
    })
  })

  test('GET /docs serves the interactive reference from this server', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/docs/' })
    assert.equal(res.statusCode, 200)
    assert.match(res.body, /swagger-ui/)
    assert.doesNotMatch(res.body, /https?:\/\/(?!localhost)[a-z]/i)
    const script = await t.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' })
    assert.equal(script.statusCode, 200)
  })
})
