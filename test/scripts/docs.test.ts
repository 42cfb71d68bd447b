import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { configurationDoc, CONFIGURATION_DOC } from '../../scripts/docs.js'
import { SERVE_HELP } from '../../src/cli/serve-help.js'
import { CONFIG_KEYS } from '../../src/config.js'
import { REPO_ROOT } from '../helpers/server-process.js'

describe('the configuration, documented from its one schema', () => {
  test('docs/configuration.md is what npm run docs makes of src/config.ts', async () => {
    assert.equal(readFileSync(CONFIGURATION_DOC, 'utf8'), await configurationDoc(), 'run npm run docs')
  })

  test('names every setting in docs/configuration.md and in plantstore serve --help', () => {
    const doc = readFileSync(CONFIGURATION_DOC, 'utf8')
    const missing = CONFIG_KEYS.filter(
      (key) => !doc.includes(`| \`${key}\``) || !new RegExp(`\\b${key}\\b`).test(SERVE_HELP),
    )
    assert.deepEqual(missing, [])
  })

  test('the README points to the configuration reference', () => {
    assert.match(readFileSync(`${REPO_ROOT}/README.md`, 'utf8'), /\(docs\/configuration\.md\)/)
  })
})
