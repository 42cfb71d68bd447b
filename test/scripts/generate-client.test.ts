import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { clientFiles, GENERATED_DIR } from '../../scripts/generate-client.js'
import { servedDocument, type OpenApiDocument } from '../../scripts/openapi-document.js'
import { ErrorCatalogue } from '../../src/errors.js'

describe("the typed client's generated files", () => {
  let doc: OpenApiDocument
  let files: Record<string, string>
  before(async () => {
    doc = await servedDocument()
    files = await clientFiles(doc)
  })

  test('are what npm run client:generate makes of the document the service serves', () => {
    for (const [name, text] of Object.entries(files)) {
      assert.equal(readFileSync(join(GENERATED_DIR, name), 'utf8'), text, `${name}: run npm run client:generate`)
    }
  })

  test('type every int64 id as bigint', () => {
    assert.match(files['openapi.ts']!, /\bid: bigint\b/)
    assert.doesNotMatch(files['openapi.ts']!, /\bid\??: number\b/)
    assert.match(files['int64-fields.ts']!, /new Set\(\['id'\]\)/)
  })

  test('name every catalogue entry with its number', () => {
    for (const [kind, { error }] of Object.entries(ErrorCatalogue)) {
      assert.match(files['error-codes.ts']!, new RegExp(`\\b${kind}: ${error},`), kind)
    }
  })
})
