/**
 * `npm run lint:openapi`: the OpenAPI document the service serves, checked by Spectral with its recommended OpenAPI
 * rules (`spectral:oas`). Errors fail it; test/scripts/lint-openapi.test.ts runs the same check in the suite.
 */
import { fileURLToPath } from 'node:url'
import spectralCore from '@stoplight/spectral-core'
import spectralParsers from '@stoplight/spectral-parsers'
import { oas } from '@stoplight/spectral-rulesets'
import { servedDocument } from './openapi-document.js'

// CommonJS packages: their exports come through the default import.
const { Document, Spectral } = spectralCore
const { Json } = spectralParsers

const SEVERITY = ['error', 'warning', 'information', 'hint'] as const

/** One finding: its severity, rule, where in the document and what it says. */
export interface Finding {
  severity: (typeof SEVERITY)[number]
  rule: string
  path: string
  message: string
}

/** What Spectral's recommended OpenAPI rules find in `doc`. */
export async function lintDocument(doc: object): Promise<Finding[]> {
  const spectral = new Spectral()
  spectral.setRuleset(oas as never)
  const results = await spectral.run(new Document(JSON.stringify(doc, null, 2), Json, 'openapi.json'))
  return results.map((result) => ({
    severity: SEVERITY[result.severity]!,
    rule: String(result.code),
    path: result.path.join('.'),
    message: result.message,
  }))
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const findings = await lintDocument(await servedDocument())
  for (const finding of findings) {
    console.log(`${finding.severity} ${finding.rule} at ${finding.path || '(root)'}: ${finding.message}`)
  }
  const errors = findings.filter((finding) => finding.severity === 'error').length
  console.log(`openapi.json: ${errors} errors, ${findings.length - errors} other findings (Spectral, spectral:oas)`)
  process.exitCode = errors > 0 ? 1 : 0
}
