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

  interface ErrorShape {
    error: number
    message: string
  }

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

    test('is OpenAPI 3.1 with the bearerAuth scheme, and the jwtBearer scheme with its claims', () => {
      assert.equal(doc.openapi, '3.1.0')
      const { bearerAuth, jwtBearer } = doc.components.securitySchemes as Record<string, Record<string, string>>
      assert.deepEqual([bearerAuth?.type, bearerAuth?.scheme], ['http', 'bearer'])
      assert.deepEqual([jwtBearer?.type, jwtBearer?.scheme, jwtBearer?.bearerFormat], ['http', 'bearer', 'JWT'])
      for (const claim of ['`iss`', '`aud`', '`exp`', '`nbf`', '`iat`', '`sub`', '`scope`', '`scp`', 'at+jwt']) {
        assert.ok(jwtBearer?.description?.includes(claim), claim)
      }
    })

    test('documents every status each operation can answer, errors with the Error shape', () => {
      const expected: Record<string, string[]> = {
        'post /plants': ['200', '400', '401', '403', '409', '413', '415', '422', '429', '500', '503'],
        'get /plants': ['200', '400', '401', '403', '429', '500', '503'],
        'get /plants/{id}': ['200', '400', '401', '403', '404', '429', '500', '503'],
        'delete /plants/{id}': ['204', '400', '401', '403', '404', '429', '500', '503'],
      }
      for (const [operation, statuses] of Object.entries(expected)) {
        const [method, path] = operation.split(' ') as [string, string]
        const responses = doc.paths[path]?.[method]?.responses
        assert.ok(responses, operation)
        assert.deepEqual(Object.keys(responses).sort(), statuses.sort(), operation)
        for (const status of statuses.filter((s) => Number(s) >= 400)) {
          const content = responses[status]?.content as Record<string, { schema: unknown }> | undefined
          assert.deepEqual(
            content?.['application/json']?.schema,
            { $ref: '#/components/schemas/Error' },
            `${operation} ${status}`,
          )
        }
        assert.deepEqual(doc.paths[path]?.[method]?.security, [{ bearerAuth: [] }, { jwtBearer: [] }])
      }
    })

    test('documents the Idempotency-Key header of POST /plants and the header that marks a replay', () => {
      const create = doc.paths['/plants']?.post as {
        parameters: Array<{ in: string; name: string; required: boolean; schema: { pattern: string } }>
        responses: Record<string, { headers?: Record<string, unknown> }>
      }
      const key = create.parameters.find((parameter) => parameter.in === 'header')
      assert.equal(key?.name, 'idempotency-key')
      assert.equal(key.required, false)
      assert.ok(new RegExp(key.schema.pattern).test('"8e03978e-40d5-43e8-bc93-6894a57f9324"'))
      assert.ok(create.responses['200']?.headers?.['Idempotent-Replayed'])
    })

    test('documents RateLimit-Policy and RateLimit on every answer to a token but its 401, and on none without one', () => {
      let documented = 0
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(item)) {
          const authenticated = (operation.security ?? [{}]).length > 0
          for (const [status, response] of Object.entries(operation.responses)) {
            const headers = (response as { headers?: Record<string, { description: string }> }).headers ?? {}
            const described = [headers['RateLimit-Policy']?.description, headers.RateLimit?.description]
            const where = `${method} ${path} ${status}`
            if (!authenticated || status === '401') {
              assert.deepEqual(described, [undefined, undefined], where)
              continue
            }
            assert.match(described[0] ?? '', /`q` requests per `w` seconds/, where)
            assert.match(described[1] ?? '', /`r` requests, and `t` seconds/, where)
            documented++
          }
        }
      }
      assert.ok(documented >= 30, `${documented} responses; the plant operations alone have 30`)
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

    test('names each operation for generated clients: createPlant, listPlants, deletePlant, …', () => {
      const ids = Object.values(doc.paths).flatMap((methods) =>
        Object.values(methods).map((operation) => (operation as { operationId?: string }).operationId),
      )
      assert.deepEqual(ids.sort(), [
        'createPlant',
        'createToken',
        'createWebhook',
        'deletePlant',
        'deleteToken',
        'deleteWebhook',
        'enableWebhook',
        'getLiveness',
        'getPlant',
        'getReadiness',
        'listPlants',
        'listTokens',
        'listWebhooks',
      ])
    })

    test('shows a realistic example body for POST /plants and its answer, not text made up from the pattern', () => {
      const post = doc.paths['/plants']!.post as unknown as {
        requestBody: { content: { 'application/json': { example: unknown } } }
        responses: Record<
          string,
          { content: { 'application/json': { examples?: Record<string, { value: unknown }> } } }
        >
      }
      assert.deepEqual(post.requestBody.content['application/json'].example, {
        id: 1,
        name: 'Monstera',
        tag: 'tropical',
      })
      const answers = Object.values(post.responses['200']!.content['application/json'].examples ?? {})
      assert.deepEqual(
        answers.map((example) => example.value),
        [{ name: 'Monstera', tag: 'tropical' }],
      )
    })

    test('shows an example of every request and response body', () => {
      type Media = Record<string, { example?: unknown; examples?: object }>
      type Operation = { requestBody?: { content: Media }; responses: Record<string, { content?: Media }> }
      for (const [path, methods] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(methods as Record<string, Operation>)) {
          const bodies: [string, Media | undefined][] = [['request', operation.requestBody?.content]]
          for (const [status, response] of Object.entries(operation.responses)) bodies.push([status, response.content])
          for (const [which, content] of bodies) {
            for (const media of Object.values(content ?? {})) {
              assert.ok(media.example !== undefined || media.examples !== undefined, `${method} ${path} ${which}`)
            }
          }
        }
      }
    })

    test('gives every error response one example per error value it lists, in the Error shape', () => {
      for (const [path, methods] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(methods)) {
          for (const [status, response] of Object.entries(operation.responses)) {
            if (Number(status) < 400) continue
            const where = `${method} ${path} ${status}`
            const media = (response.content as Record<string, { examples?: Record<string, { value: ErrorShape }> }>)[
              'application/json'
            ]
            const examples = Object.values(media?.examples ?? {}).map((example) => example.value)
            const listed = [...(response as { description: string }).description.matchAll(/\b(\d{5}): /g)].map(
              (match) => Number(match[1]),
            )
            assert.deepEqual(
              examples.map((example) => example.error),
              listed,
              where,
            )
            for (const example of examples) assert.ok(example.message.length > 0, where)
          }
        }
      }
    })

    test('lists the whole error catalogue with the Error schema, which the reference page shows after the operations', () => {
      const error = (doc.components.schemas as Record<string, { description: string }>).Error!
      for (const entry of Object.values(ErrorCatalogue)) assert.ok(error.description.includes(`| ${entry.error} |`))
      assert.doesNotMatch(doc.info.description, /\| 40401 \|/)
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

  test('serves the document at /openapi.json alone: the reference loads it there, /docs/json and /docs/yaml are 404', async () => {
    const init = await t.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' })
    assert.match(init.body, /"urls":\[\{"url":"\/openapi\.json"/)
    for (const url of ['/docs/json', '/docs/yaml', '/docs/json?x=1']) {
      const res = await t.app.inject({ method: 'GET', url })
      assert.equal(res.statusCode, 404, url)
      assert.deepEqual(res.json(), { error: 40402, message: `no route for GET ${url.split('?')[0]}` })
    }
  })
})
