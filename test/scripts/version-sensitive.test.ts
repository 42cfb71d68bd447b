import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { REPO_ROOT } from '../helpers/server-process.js'

const LIST = readFileSync(join(REPO_ROOT, 'test', 'version-sensitive.txt'), 'utf8')

test('every file on the version-sensitive list is a test file of the suite, listed once, with its reason', () => {
  const entries = LIST.split('\n').filter((line) => line !== '' && !line.startsWith('#'))
  assert.ok(entries.length > 0)
  const paths = entries.map((line) => {
    const match = /^(\S+\.test\.ts) # (\S.*)$/.exec(line)
    assert.ok(match, `"${line}": a test file's path, then # and why it depends on the Node.js release`)
    assert.ok(existsSync(join(REPO_ROOT, match[1]!)), `${match[1]} exists`)
    return match[1]!
  })
  assert.deepEqual(
    paths.filter((path, i) => paths.indexOf(path) !== i),
    [],
    'each file once',
  )
})
