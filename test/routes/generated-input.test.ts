import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { BODY_LIMIT } from '../../src/plugins/json-body.js'
import { INT64_MAX, INT64_MIN } from '../../src/schemas/int64.js'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { parseExact } from '../helpers/json.js'
import { testOnce } from '../helpers/once.js'

// Generated requests per backend and run: 10,000 in all, as CI must send at least that many; POSTs carry generated
// extra headers. buildTestApp checks every response against the service's own /openapi.json too.
const RUNS = { bodies: 4000, queries: 3000, ids: 2000, authorization: 1000 }
const TIMEOUT_MS = 300_000

interface Sent {
  statusCode: number
  headers: Record<string, unknown>
  body: string
}

interface StoredPlant {
  name: string
  tag?: string
}

/** The status is one of `allowed` (never a 5xx: no property allows one); a 4xx carries exactly {error, message}. */
function assertOutcome(res: Sent, allowed: number[], what: string): void {
  assert.ok(allowed.includes(res.statusCode), `${what}: ${res.statusCode}, not one of ${allowed}: ${res.body}`)
  if (res.statusCode < 400) return
  assert.match(String(res.headers['content-type']), /^application\/json/, what)
  const body = JSON.parse(res.body) as Record<string, unknown>
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message'], what)
  assert.equal(typeof body.error, 'number', what)
  assert.equal(Math.floor((body.error as number) / 100), res.statusCode, `an error code of another status: ${what}`)
  assert.equal(typeof body.message, 'string', what)
}

// Numbers as JSON text: small pool ids (so creates collide), int64 edges and beyond, fractions, exponents.
const idText = fc.oneof(
  fc.integer({ min: 1, max: 40 }).map(String),
  fc.constantFrom(
    String(INT64_MAX),
    String(INT64_MIN),
    '9223372036854775808',
    '-9223372036854775809',
    '1e3',
    '1E+2',
    '-0',
    '1.0',
    '1.5',
    '0.1e1',
    '1e400',
    '"1"',
    'null',
    'true',
    '[1]',
    '{}',
  ),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  fc.double().map((n) => JSON.stringify(n)),
)
// Any UTF-16 code unit, lone surrogates and NUL included.
const anyUnit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code))
const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: anyUnit, maxLength: 12 }),
  fc.constantFrom('', ' ', 'x'.repeat(100), 'x'.repeat(101), 'x'.repeat(200), 'x'.repeat(201)),
)
const textValue = fc.oneof(
  { weight: 4, arbitrary: text.map((s) => JSON.stringify(s)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)) },
)
const extraKey = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'extra', 'ID', 'id ')

/** A body as JSON text: members in any order, some missing, some repeated, some unknown. */
const objectBody = fc
  .record(
    {
      id: idText,
      name: textValue,
      tag: fc.oneof(textValue, fc.constant('null')),
      extra: fc.tuple(
        extraKey,
        fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? 'null'),
      ),
      duplicate: fc.constantFrom('id', 'name', 'tag'),
    },
    { requiredKeys: [] },
  )
  .chain((parts) => {
    const members: string[] = []
    if (parts.id !== undefined) members.push(`"id":${parts.id}`)
    if (parts.name !== undefined) members.push(`"name":${parts.name}`)
    if (parts.tag !== undefined) members.push(`"tag":${parts.tag}`)
    if (parts.extra !== undefined) members.push(`${JSON.stringify(parts.extra[0])}:${parts.extra[1]}`)
    if (parts.duplicate !== undefined && members.length > 0) members.push(members[0]!)
    return fc.shuffledSubarray(members, { minLength: members.length, maxLength: members.length })
  })
  .map((members) => `{${members.join(',')}}`)

// Well-formed plants over a few ids and names, so creates, identical retries and conflicts all happen.
const validBody = fc
  .record({
    id: fc.oneof(fc.integer({ min: 1, max: 40 }).map(String), fc.constantFrom(String(INT64_MAX), String(INT64_MIN))),
    name: fc.constantFrom('Monstera', 'Boston fern', 'Ivy', 'Ficus «lyrata»'),
    tag: fc.option(fc.constantFrom('green', 'tropical', '🌿'), { nil: undefined }),
  })
  .map(
    ({ id, name, tag }) =>
      `{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`,
  )

const rawBody = fc.oneof(
  { weight: 6, arbitrary: validBody.map((t) => Buffer.from(t)) },
  { weight: 8, arbitrary: objectBody.map((t) => Buffer.from(t)) },
  { weight: 1, arbitrary: fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? '')) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3000 }).map((n) => Buffer.from('['.repeat(n) + ']'.repeat(n))) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)) },
  {
    weight: 1,
    arbitrary: objectBody.map((t) => Buffer.concat([Buffer.from(t.slice(0, -1)), Buffer.from([0xff, 0x7d])])),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('', ' ', '\n', '{', '{"id":1,"name":"a"', 'x'.repeat(70_000)).map((t) => Buffer.from(t)),
  },
)
const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      undefined,
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
    ),
  },
)

// Other headers a client may send, wanted or not: none may change what a POST does, except a content coding.
const extraHeaders = fc.dictionary(
  fc.constantFrom(
    'x-request-id',
    'accept',
    'accept-encoding',
    'content-encoding',
    'content-language',
    'expect',
    'x-forwarded-for',
    'x-http-method-override',
    'if-match',
    'origin',
    'cookie',
    'x-custom',
  ),
  fc.oneof(
    fc.constantFrom(
      'gzip',
      'identity',
      'Identity',
      'deflate',
      'br',
      '*/*',
      'application/xml',
      '100-continue',
      'DELETE',
    ),
    fc.string({ maxLength: 200 }),
  ),
  { maxKeys: 3 },
)

/** True when `headers` declare a compressed body, which the service never reads as JSON. */
const compressed = (headers: Record<string, string>) =>
  !['', 'identity', undefined].includes(headers['content-encoding']?.trim().toLowerCase())

/**
 * What a POST may be answered, from what it sends: 415 for a body that is not JSON text in UTF-8 as sent (400 for
 * none at all, with no Content-Type), 413 past the body limit, else 400 if the body is no valid plant (what the
 * property tests) or 200/409 as the store decides (checked against the model below).
 */
function postAnswers(body: Buffer, type: string | undefined, extra: Record<string, string>): number[] {
  const json = type !== undefined && /^application\/json(;|$)/.test(type)
  if (!json) return type === undefined && body.length === 0 ? [400] : [415]
  if (body.length > BODY_LIMIT) return [413]
  if (compressed(extra) || /charset=(?!utf-?8)/i.test(type)) return [415]
  return [200, 400, 409]
}

/** What a DELETE may be answered: 404 when the path names no plant route, else 400, 204 or 404 by the id. */
function deleteAnswers(id: string): number[] {
  const path = new URL(`/plants/${id}`, 'http://localhost').pathname
  if (!/^\/plants\/[^/]*$/.test(path)) return [404]
  return isCanonicalInt64(id) ? [204, 404] : [400]
}

/** What the account should hold if the request is accepted: the body as the service reads it (int64 exact). */
function acceptedPlant(body: Buffer): { id: bigint; plant: StoredPlant } {
  const value = parseExact(body.toString('utf8')) as { id: bigint; name: string; tag?: string | null }
  return { id: value.id, plant: value.tag == null ? { name: value.name } : { name: value.name, tag: value.tag } }
}

const samePlant = (a: StoredPlant, b: StoredPlant) => a.name === b.name && a.tag === b.tag

// Path ids: canonical int64s (some stored), and everything a careless client might put in the path.
const pathId = fc.oneof(
  fc.integer({ min: 1, max: 40 }).map(String),
  fc.bigInt({ min: -(2n ** 65n), max: 2n ** 65n }).map(String),
  fc.constantFrom('007', '-0', '+1', '1e3', '1.0', ' 1', '0x10', String(INT64_MAX), '9223372036854775808', ''),
  fc.string({ maxLength: 8 }).map(encodeURIComponent),
  fc.constantFrom('%', '%zz', '%ff', '%00', '..', '%2F', 'a/b'),
)

const isCanonicalInt64 = (s: string) =>
  /^-?[0-9]+$/.test(s) && String(BigInt(s)) === s && BigInt(s) >= INT64_MIN && BigInt(s) <= INT64_MAX

const queryKey = fc.constantFrom('limit', 'cursor', 'tag', 'fields', 'x', 'limit[]', '__proto__', 'LIMIT')
const queryValue = fc.oneof(
  fc.constantFrom(
    '0',
    '1',
    '20',
    '1000',
    '1001',
    '-1',
    '1e2',
    '2.5',
    '',
    'id,name',
    'name',
    'tag',
    'id',
    'name,tag,id',
  ),
  fc.constantFrom('9223372036854775808', 'cDE6Mg', 'cDE6', 'xx', '%', '%zz', '%00', '%ff'),
  fc.string({ maxLength: 10 }).map(encodeURIComponent),
)
const query = fc
  .array(fc.tuple(queryKey, queryValue), { maxLength: 4 })
  .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join('&'))

for (const backend of backends) {
  describe(`generated input (${backend.name})`, () => {
    let t: TestApp
    let secret: string
    const model = new Map<bigint, StoredPlant>()
    const sources = new Map<bigint, string>()
    // How often each answer came: a property whose requests all fail validation would prove little.
    const seen = new Map<string, number>()
    const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1)
    before(async () => {
      t = await buildTestApp(backend)
      secret = await t.token('fuzz')
    })
    after(() => t.close())

    // The DELETEs are predicted by the model the POSTs built, and the last test checks the store against all three
    // properties: each property runs once, in its test or first in a later one that builds on it, so any test run
    // alone (--test-name-pattern) has what it checks.
    const postBodies = testOnce(
      `answers ${RUNS.bodies} generated POST bodies with 200, 409 or a 4xx in the Error shape, as the store predicts`,
      { timeout: TIMEOUT_MS },
      async () => {
        await fc.assert(
          fc.asyncProperty(rawBody, contentType, extraHeaders, async (body, type, extra) => {
            const res = await t.app.inject({
              method: 'POST',
              url: '/plants',
              headers: { ...extra, ...bearer(secret), ...(type === undefined ? {} : { 'content-type': type }) },
              payload: body,
            })
            const what = `POST ${JSON.stringify(extra)} ${body.toString('utf8').slice(0, 200)}`
            assertOutcome(res, postAnswers(body, type, extra), what)
            count(`POST ${res.statusCode}`)
            if (res.statusCode !== 200 && res.statusCode !== 409) return
            assert.ok(!compressed(extra), `a compressed body was read as JSON: ${what}`)
            const { id, plant } = acceptedPlant(body)
            const known = model.get(id)
            const expected = known === undefined || samePlant(known, plant) ? 200 : 409
            assert.equal(
              res.statusCode,
              expected,
              `id ${id}: stored ${JSON.stringify(known)}, sent ${JSON.stringify(plant)}`,
            )
            if (res.statusCode === 200) {
              assert.deepEqual(JSON.parse(res.body), plant)
              model.set(id, plant)
              sources.set(id, body.toString('utf8'))
            }
          }),
          { numRuns: RUNS.bodies, includeErrorInReport: true },
        )
      },
    )

    const listQueries = testOnce(
      `answers ${RUNS.queries} generated list queries with 200 or a 4xx in the Error shape`,
      { timeout: TIMEOUT_MS },
      async () => {
        await fc.assert(
          fc.asyncProperty(query, async (q) => {
            const res = await t.app.inject({ method: 'GET', url: `/plants?${q}`, headers: bearer(secret) })
            // Whether the service takes a generated query is what is tested: 200 or 400, no other refusal.
            assertOutcome(res, [200, 400], `GET /plants?${q}`)
            count(`GET ${res.statusCode}`)
            if (res.statusCode === 200) assert.ok(Array.isArray(JSON.parse(res.body)))
          }),
          { numRuns: RUNS.queries, includeErrorInReport: true },
        )
      },
    )

    const deletePaths = testOnce(
      `answers ${RUNS.ids} generated paths, read then deleted, with 200, 204, 404 as the store predicts, or a 4xx in the Error shape`,
      // Run alone, it runs the POST property first, under this test's timeout.
      { timeout: 2 * TIMEOUT_MS },
      async () => {
        await postBodies()
        await fc.assert(
          fc.asyncProperty(pathId, async (id) => {
            // A read of the same path first: the plant as the model holds it, or what the DELETE would refuse.
            const read = await t.app.inject({ method: 'GET', url: `/plants/${id}`, headers: bearer(secret) })
            assertOutcome(
              read,
              deleteAnswers(id).map((s) => (s === 204 ? 200 : s)),
              `GET /plants/${id}`,
            )
            count(`GET /plants/{id} ${read.statusCode}`)
            if (isCanonicalInt64(id)) {
              const held = model.get(BigInt(id))
              assert.equal(read.statusCode, held ? 200 : 404, `GET ${id}; created by ${sources.get(BigInt(id))}`)
              if (held) assert.deepEqual(read.json(), held)
            }
            const res = await t.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: bearer(secret) })
            assertOutcome(res, deleteAnswers(id), `DELETE /plants/${id}`)
            count(`DELETE ${res.statusCode}`)
            if (!isCanonicalInt64(id)) return
            const known = model.has(BigInt(id))
            assert.equal(res.statusCode, known ? 204 : 404, `DELETE ${id}; created by ${sources.get(BigInt(id))}`)
            model.delete(BigInt(id))
          }),
          { numRuns: RUNS.ids, includeErrorInReport: true },
        )
      },
    )

    test(
      `lets in only the valid token among ${RUNS.authorization} generated Authorization headers`,
      { timeout: TIMEOUT_MS },
      async () => {
        const header = fc.oneof(
          fc.string({ maxLength: 20 }),
          fc.string({ maxLength: 20 }).map((s) => `Bearer ${s}`),
          fc.string({ maxLength: 4 }).map((s) => `Bearer ${secret}${s}`),
          fc.integer({ min: 0, max: secret.length - 1 }).map((n) => `Bearer ${secret.slice(0, n)}`),
          fc.constantFrom(`bearer ${secret}`, `Bearer  ${secret}`, `Basic ${secret}`, `Bearer ${secret} `, 'Bearer'),
        )
        await fc.assert(
          fc.asyncProperty(header, async (authorization) => {
            const res = await t.app.inject({ method: 'GET', url: '/plants?limit=1', headers: { authorization } })
            // The scheme in any case, the token between spaces: only the token itself lets in.
            const token = /^bearer +(\S+) *$/i.exec(authorization)?.[1]
            assertOutcome(res, [token === secret ? 200 : 401], `Authorization: ${authorization}`)
          }),
          { numRuns: RUNS.authorization, includeErrorInReport: true },
        )
      },
    )

    // Run alone, it runs the three properties first, under this test's timeout.
    test('holds exactly the plants the accepted requests say, no more', { timeout: 3 * TIMEOUT_MS }, async () => {
      await deletePaths()
      await listQueries()
      const stored = new Map<bigint, StoredPlant>()
      let url = '/plants?fields=id,name,tag&limit=1000'
      for (;;) {
        const res = await t.app.inject({ method: 'GET', url, headers: bearer(secret) })
        assert.equal(res.statusCode, 200)
        for (const item of parseExact(res.body) as Array<{ id: bigint; name: string; tag?: string }>) {
          stored.set(item.id, item.tag === undefined ? { name: item.name } : { name: item.name, tag: item.tag })
        }
        const next = /<([^>]+)>; rel="next"/.exec(String(res.headers.link ?? ''))
        if (next === null) break
        url = next[1]!
      }
      assert.deepEqual(stored, model)
      // Every kind of answer came up often enough for the properties to mean something.
      for (const answer of [
        'POST 200',
        'POST 409',
        'POST 400',
        'GET 200',
        'GET 400',
        'GET /plants/{id} 200',
        'GET /plants/{id} 404',
        'GET /plants/{id} 400',
        'DELETE 204',
        'DELETE 404',
        'DELETE 400',
      ]) {
        assert.ok(
          (seen.get(answer) ?? 0) >= 20,
          `${answer} came ${seen.get(answer) ?? 0} times: ${JSON.stringify([...seen])}`,
        )
      }
    })
  })
}
