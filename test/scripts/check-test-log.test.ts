import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { cleanup, REPO_ROOT, tempDir } from '../helpers/server-process.js'

after(cleanup)

// The logs are real: each fixture runs under this Node's own test runner, with each of its two reporters, so the
// check is tried on what every Node line CI tests prints (spec, and TAP: what Node 20 and 22 write into a pipe).
const REPORTERS = ['spec', 'tap'] as const
const CHECK = join(REPO_ROOT, 'scripts', 'check-test-log.js')

const HEADER = "import { describe, test } from 'node:test'\n"
// null: no test file at all, so the runner finds none.
const FIXTURES = {
  clean: `describe('a suite', () => { test('passes', () => {}); test('names # SKIP and # TODO', () => {}) })`,
  skippedDescribe: `test('passes', () => {})
describe('a suite that needs unshare', { skip: 'needs unshare -Urm' }, () => { test('inner', () => {}) })`,
  skippedTest: `test('passes', () => {}); test('a skipped test', { skip: true }, () => {})`,
  skippedInside: `test('passes', () => {}); test('skips itself', (t) => { t.skip('not here') })`,
  todoTest: `test('passes', () => {}); test('a todo test', { todo: 'later' }, () => {})`,
  todoDescribe: `test('passes', () => {})
describe('a todo suite', { todo: 'later' }, () => { test('inner', () => {}) })`,
  failing: `test('passes', () => {}); test('fails', () => { throw new Error('broken') })`,
  none: null,
} satisfies Record<string, string | null>

/** What `node --test` printed for `fixture` with `reporter`. */
function runLog(fixture: keyof typeof FIXTURES, reporter: (typeof REPORTERS)[number]): string {
  const dir = tempDir()
  const source = FIXTURES[fixture]
  if (source !== null) writeFileSync(join(dir, 'fixture.test.mjs'), HEADER + source)
  // Without NODE_TEST_CONTEXT: it would make the child report to this runner instead of printing a log.
  const env = { ...process.env, NODE_TEST_CONTEXT: undefined, FORCE_COLOR: undefined, NODE_OPTIONS: undefined }
  const run = spawnSync(
    process.execPath,
    ['--test', `--test-reporter=${reporter}`, ...(source === null ? [] : ['fixture.test.mjs'])],
    {
      cwd: dir,
      env,
      encoding: 'utf8',
    },
  )
  assert.ok(/^(ℹ|#) tests \d+$/m.test(run.stdout), `a summary in: ${run.stdout}${run.stderr}`)
  return run.stdout
}

/** The check's exit status and what it said, for `log`. */
function check(log: string): { status: number | null; stderr: string } {
  const file = join(tempDir(), 'test.log')
  writeFileSync(file, log)
  const { status, stderr } = spawnSync(process.execPath, [CHECK, file], { encoding: 'utf8' })
  return { status, stderr }
}

for (const reporter of REPORTERS) {
  describe(`the check of a test log (${reporter} reporter)`, () => {
    test('passes a run where every test passed, though test names hold "# SKIP" and "# TODO"', () => {
      assert.deepEqual(check(runLog('clean', reporter)), { status: 0, stderr: '' })
    })

    test('fails a run whose only skip is a skipped describe, which the summary counts as "skipped 0"', () => {
      const log = runLog('skippedDescribe', reporter)
      assert.match(log, /^(ℹ|#) skipped 0$/m, 'the summary line alone would pass it')
      const { status, stderr } = check(log)
      assert.equal(status, 1)
      assert.match(stderr, /skipped or todo: .*a suite that needs unshare.*needs unshare -Urm/)
    })

    for (const [fixture, name] of [
      ['skippedTest', 'a skipped test'],
      ['skippedInside', 'skips itself'],
      ['todoTest', 'a todo test'],
      ['todoDescribe', 'a todo suite'],
    ] as const) {
      test(`fails a run with ${fixture === 'skippedInside' ? 'a test calling t.skip()' : name}, naming it`, () => {
        const { status, stderr } = check(runLog(fixture, reporter))
        assert.equal(status, 1)
        assert.match(stderr, new RegExp(`skipped or todo: .*${name}`))
      })
    }

    test('fails a run with a failing test', () => {
      const { status, stderr } = check(runLog('failing', reporter))
      assert.equal(status, 1)
      assert.match(stderr, /summary: fail 1/)
    })

    test('fails a run that ran no test', () => {
      const { status, stderr } = check(runLog('none', reporter))
      assert.equal(status, 1)
      assert.match(stderr, /summary: tests 0/)
    })

    // npm test's two runs (scripts/test.js), each begun by its line.
    const runs = (...logs: string[]) =>
      logs.map((log, i) => `plantstore-test: run ${i + 1} of 2: 1 file, …\n${log}`).join('')

    test("passes npm test's two runs when both are clean", () => {
      assert.deepEqual(check(runs(runLog('clean', reporter), runLog('clean', reporter))), { status: 0, stderr: '' })
    })

    test('fails two runs when the first failed, though the last summary is clean', () => {
      const { status, stderr } = check(runs(runLog('failing', reporter), runLog('clean', reporter)))
      assert.equal(status, 1)
      assert.match(stderr, /run 1: summary: fail 1/)
    })

    test('fails when the second run never began, as when the runner died between them', () => {
      const { status, stderr } = check(runs(runLog('clean', reporter)))
      assert.equal(status, 1)
      assert.match(stderr, /1 of 2 runs began/)
    })

    test('fails a log that stops before the summary, as when the run died', () => {
      const log = runLog('clean', reporter)
      const { status, stderr } = check(log.slice(0, log.search(/^(ℹ|#) tests /m)))
      assert.equal(status, 1)
      assert.match(stderr, /no summary/)
    })
  })
}
