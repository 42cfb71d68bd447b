import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, describe, test } from 'node:test'
import { configurationDoc, CONFIGURATION_DOC } from '../../scripts/docs.js'
import { SERVE_HELP } from '../../src/cli/serve-help.js'
import { CONFIG_KEYS } from '../../src/config.js'
import { cleanup, REPO_ROOT, runCli } from '../helpers/server-process.js'

after(cleanup)

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

  test('plantstore serve --help, as the command prints it, has a heading for every setting', async () => {
    const result = await runCli(['serve', '--help'])
    assert.equal(result.code, 0, result.stderr)
    const missing = CONFIG_KEYS.filter((key) => !new RegExp(`^ {2}(--[a-z-]+, )?${key}$`, 'm').test(result.stdout))
    assert.deepEqual(missing, [])
  })

  test('the README names no variable that is not a setting (the test suite’s own and CLI placeholders apart)', () => {
    const readme = readFileSync(`${REPO_ROOT}/README.md`, 'utf8')
    const named = new Set(readme.match(/\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b/g))
    const unknown = [...named].filter(
      (name) => !name.startsWith('PLANTSTORE_TEST_') && !name.endsWith('_ID') && !CONFIG_KEYS.includes(name as never),
    )
    assert.deepEqual(unknown, [])
  })

  test('the README points to the configuration reference', () => {
    assert.match(readFileSync(`${REPO_ROOT}/README.md`, 'utf8'), /\(docs\/configuration\.md\)/)
  })
})

describe('the README’s install', () => {
  test('says that npm install may compile SQLite for minutes, printing nothing meanwhile', () => {
    const readme = readFileSync(`${REPO_ROOT}/README.md`, 'utf8')
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('### Walk-through'))
    assert.match(quickStart, /`npm install` then compiles SQLite, which takes minutes and prints nothing meanwhile/)
  })
})
