import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { cleanup, REPO_ROOT, tempDir } from '../helpers/server-process.js'

after(cleanup)

// A file with one test that needs the test before it, names full of regular-expression characters, a name two
// describes share, and a subtest.
const FIXTURE = `
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
let counted = 0
describe('counts (a+b)', () => {
  test('counts once [1/2] *', () => { counted++ })
  test('sees the count? $1', () => assert.equal(counted, 1))
})
describe('other', () => {
  test('counts once [1/2] *', () => {})
  test('has a subtest', async (t) => { await t.test('inner', () => {}) })
})
`

describe('scripts/each-test-alone.ts', () => {
  test('names the test that fails alone, and runs every other one alone by its exact name', async () => {
    const file = join(tempDir(), 'order.test.mjs')
    writeFileSync(file, FIXTURE)
    const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/each-test-alone.ts', file], {
      cwd: REPO_ROOT,
    }).then(
      () => assert.fail('exit 0 despite a test that fails alone'),
      (err: { code: number; stdout: string }) => err,
    )
    assert.equal(run.code, 1, run.stdout)
    const lines = run.stdout.split('\n').filter((line) => line.startsWith('  ') && !line.startsWith('    log:'))
    assert.equal(lines.length, 3, run.stdout)
    assert.match(lines[0]!, /^ {2}ok .* counts \(a\+b\) > counts once \[1\/2\] \* \(with its 1 namesake\(s\)\)$/)
    assert.match(lines[1]!, /^ {2}FAILS ALONE, TWICE .* counts \(a\+b\) > sees the count\? \$1$/)
    assert.match(lines[2]!, /^ {2}ok .* other > has a subtest$/)
    assert.match(run.stdout, /: 1 problem\(s\)/)
  })
})
