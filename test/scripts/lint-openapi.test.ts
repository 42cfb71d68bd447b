import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { lintDocument } from '../../scripts/lint-openapi.js'
import { servedDocument } from '../../scripts/openapi-document.js'

describe('the served OpenAPI document under Spectral (spectral:oas, its recommended rules)', () => {
  // Accepted, with the reason: the contact is each deployment's operator, whom the service cannot name.
  const ACCEPTED = new Set(['info-contact'])

  test('has no errors, and no warnings but those accepted', async () => {
    const findings = await lintDocument(await servedDocument())
    const serious = findings.filter(
      (finding) => finding.severity === 'error' || (finding.severity === 'warning' && !ACCEPTED.has(finding.rule)),
    )
    assert.deepEqual(serious, [])
  })

  test('finds the errors it is there to find: an example that does not match its schema', async () => {
    const doc = (await servedDocument()) as unknown as {
      paths: { '/plants': { post: { requestBody: { content: { 'application/json': { example: unknown } } } } } }
    }
    doc.paths['/plants'].post.requestBody.content['application/json'].example = { id: 'one', name: 7 }
    const errors = (await lintDocument(doc)).filter((finding) => finding.severity === 'error')
    assert.deepEqual([...new Set(errors.map((finding) => finding.rule))], ['oas3-valid-media-example'])
  })
})
