import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { after, test } from 'node:test'
// @ts-expect-error: plain JavaScript without declarations (npm test runs it before anything is compiled)
import { concurrency, listed, plan } from '../../scripts/test.js'
import { cleanup, REPO_ROOT, tempDir } from '../helpers/server-process.js'

after(cleanup)

const SERIAL = readFileSync(join(REPO_ROOT, 'test', 'serial.txt'), 'utf8')

test('every file on the serial list is a test file of the suite, listed once, with its reason', () => {
  const entries = SERIAL.split('\n').filter((line) => line !== '' && !line.startsWith('#'))
  assert.ok(entries.length > 0)
  for (const line of entries) {
    const match = /^(\S+\.test\.ts) # (\S.*)$/.exec(line)
    assert.ok(match, `"${line}": a test file's path, then # and why it runs alone`)
    assert.ok(existsSync(join(REPO_ROOT, match[1]!)), `${match[1]} exists`)
  }
  const paths: string[] = listed(SERIAL)
  assert.deepEqual(
    paths.filter((path, i) => paths.indexOf(path) !== i),
    [],
    'each file once',
  )
})

test('runs the files beside each other first and the serial ones one at a time after them', () => {
  const runs = plan(['a.test.ts', 'b.test.ts', 'c.test.ts'], ['b.test.ts'], 3)
  assert.deepEqual(
    runs.map((run: { files: string[]; concurrency: number }) => [run.files, run.concurrency]),
    [
      [['a.test.ts', 'c.test.ts'], 3],
      [['b.test.ts'], 1],
    ],
  )
  assert.equal(plan(['b.test.ts'], ['b.test.ts'], 3).length, 1, 'no empty run')
})

test('takes PLANTSTORE_TEST_CONCURRENCY as a whole number from 1 and refuses anything else, naming it', () => {
  assert.equal(concurrency(undefined), 3)
  assert.equal(concurrency('5'), 5)
  for (const bad of ['0', '-1', '2.5', 'many'])
    assert.throws(() => concurrency(bad), /PLANTSTORE_TEST_CONCURRENCY must be a whole number from 1/)
})

test('exits 1 and names each run when a test of the given files fails', () => {
  const dir = tempDir()
  const header = "import { test } from 'node:test'\n"
  writeFileSync(join(dir, 'passes.test.ts'), `${header}test('passes', () => {})\n`)
  writeFileSync(join(dir, 'fails.test.ts'), `${header}test('fails', () => { throw new Error('broken') })\n`)
  // Durations of its own: the run kept the fixtures' times beside the suite's, in the file CI keeps.
  const durations = join(dir, 'durations.json')
  const env = {
    ...process.env,
    NODE_TEST_CONTEXT: undefined,
    NODE_OPTIONS: undefined,
    PLANTSTORE_TEST_DURATIONS: durations,
  }
  const run = spawnSync(
    process.execPath,
    [join(REPO_ROOT, 'scripts', 'test.js'), join(dir, 'passes.test.ts'), join(dir, 'fails.test.ts')],
    { cwd: REPO_ROOT, env, encoding: 'utf8' },
  )
  assert.equal(run.status, 1, run.stdout + run.stderr)
  assert.match(run.stdout, /^plantstore-test: run 1 of 1: 2 files, beside each other, 3 at a time$/m)
  assert.match(run.stdout, /^(ℹ|#) fail 1$/m)
  const kept = JSON.parse(readFileSync(durations, 'utf8')) as Record<string, number>
  assert.deepEqual(
    Object.keys(kept).sort(),
    [join(dir, 'fails.test.ts'), join(dir, 'passes.test.ts')].map((file) => relative(REPO_ROOT, file)),
  )
})
