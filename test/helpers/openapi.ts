import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'

interface Operation {
  responses: Record<string, DocumentedResponse>
}

interface DocumentedResponse {
  description?: string
  headers?: Record<string, { required?: boolean; schema?: object }>
  content?: Record<string, { schema?: object }>
}

interface OpenApi {
  paths: Record<string, Record<string, Operation>>
}

/** What an inject() response offers the check. */
export interface SeenResponse {
  statusCode: number
  headers: Record<string, unknown>
  body: string
}

const DOC_ID = 'openapi.json'
const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')

/** What the test says of a response it checks. */
export interface CheckOptions {
  /** The 5xx status the test provoked on purpose; any other 5xx fails the check. */
  expectServerError?: number
}

/** The check of one response. */
export type ResponseCheck = (method: string, url: string, res: SeenResponse, options?: CheckOptions) => void

/**
 * Checks responses against the service's own GET /openapi.json: the status is documented for the operation,
 * the Content-Type is one it lists, the body matches its schema, required headers are there, and an error code
 * is one the response's description lists. Documentation and behaviour cannot drift apart unnoticed.
 *
 * A 5xx fails unless the test says it provoked that very status: every route documents 500 (`internal`) and 503
 * (storage unavailable, overload), so the document alone would let a crash or an unplanned outage pass.
 */
export async function openApiChecker(app: Pick<FastifyInstance, 'inject'>): Promise<ResponseCheck> {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApi
  // Formats here (int32, int64) document ranges the schemas state anyway.
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true })
  ajv.addSchema(doc as object, DOC_ID)
  const validators = new Map<string, ValidateFunction>()
  const validator = (ref: string) => {
    let validate = validators.get(ref)
    if (validate === undefined) validators.set(ref, (validate = ajv.compile({ $ref: `${DOC_ID}#/${ref}` })))
    return validate
  }
  const templates = Object.keys(doc.paths).map((template) => ({
    template,
    pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  }))

  return (method, url, res, options = {}) => {
    const what = `${method} ${url} → ${res.statusCode} ${res.body.slice(0, 200)}`
    if (res.statusCode >= 500) {
      assert.equal(res.statusCode, options.expectServerError, `a ${res.statusCode} the test did not provoke: ${what}`)
    }
    // As the router sees it: dot segments resolved (`/plants/..` is `/`).
    const path = new URL(url, 'http://localhost').pathname
    const template = templates.find((t) => t.pattern.test(path))?.template
    const operation = template === undefined ? undefined : doc.paths[template]?.[method.toLowerCase()]
    // Unknown routes answer 404 in the Error shape; nothing documents them.
    if (operation === undefined) return
    const status = String(res.statusCode)
    const documented = operation.responses[status] ?? operation.responses.default
    assert.ok(documented, `undocumented status: ${what}`)
    const statusKey = operation.responses[status] ? status : 'default'
    for (const [name, header] of Object.entries(documented.headers ?? {})) {
      if (header.required) assert.ok(res.headers[name.toLowerCase()] !== undefined, `missing header ${name}: ${what}`)
    }
    if (documented.content === undefined) {
      assert.equal(res.body, '', `undocumented body: ${what}`)
      return
    }
    const type = String(res.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
    assert.ok(type in documented.content, `undocumented Content-Type ${type}: ${what}`)
    const ref = pointer('paths', template!, method.toLowerCase(), 'responses', statusKey, 'content', type, 'schema')
    const body: unknown = JSON.parse(res.body)
    const validate = validator(ref)
    assert.ok(validate(body), `body does not match the document (${ajv.errorsText(validate.errors)}): ${what}`)
    const listed = /`error` is one of: (.*)$/s.exec(documented.description ?? '')?.[1]
    const code = (body as { error?: unknown }).error
    if (listed !== undefined && typeof code === 'number') {
      assert.ok(listed.includes(`${code}:`), `error ${code} not among those documented (${listed}): ${what}`)
    }
  }
}
