import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { promisify } from 'node:util'
import { REPO_ROOT } from './helpers/server-process.js'

const OPERATIONS = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8')

/** The shell blocks of docs/operations.md's section `heading` (a `## ` line), their commands one per line. */
function shellOf(heading: string): string[] {
  const section = OPERATIONS.split(`\n## ${heading}\n`)[1]?.split(/\n## /)[0]
  assert.ok(section !== undefined, `docs/operations.md has a section "${heading}"`)
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((match) => match[1]!)
  return blocks.flatMap((block) => block.replace(/\\\n\s*/g, ' ').split('\n')).filter((line) => /^\S/.test(line))
}

/** The index of the first command of `lines` matching `pattern`; fails naming it when there is none. */
function indexOf(lines: string[], pattern: RegExp): number {
  const at = lines.findIndex((line) => pattern.test(line) && !line.startsWith('#'))
  assert.ok(at >= 0, `a command matching ${pattern} in ${JSON.stringify(lines, null, 1)}`)
  return at
}

describe('docs/operations.md, as an operator follows it', () => {
  test('Upgrading installs the new version apart, stops before switching, and migrates as the service user with --database', () => {
    const lines = shellOf('Upgrading')
    for (const install of lines.filter((line) => /npm (ci|install)/.test(line))) {
      assert.match(
        install,
        /^cd \/opt\/plantstore\.new && /,
        'an install into the running directory deletes its node_modules',
      )
    }
    const stop = indexOf(lines, /systemctl stop plantstore/)
    const backup = indexOf(lines, /plantstore\.js backup /)
    const swap = indexOf(lines, /mv \/opt\/plantstore\.new \/opt\/plantstore/)
    const migrate = indexOf(lines, /plantstore\.js migrate /)
    const start = indexOf(lines, /systemctl start plantstore/)
    assert.deepEqual(
      [stop, backup, swap, migrate, start],
      [stop, backup, swap, migrate, start].toSorted((a, b) => a - b),
    )
    assert.match(
      lines[migrate]!,
      /^sudo -u plantstore node \/opt\/plantstore\/bin\/plantstore\.js migrate --database \S+$/,
    )
  })

  test('the move to PostgreSQL creates the role and database before importing into it', () => {
    const lines = shellOf('Moving from SQLite to PostgreSQL')
    const createdb = indexOf(lines, /^createdb .*--owner plantstore plantstore$/)
    assert.ok(indexOf(lines, /^createuser /) < createdb)
    assert.ok(createdb < indexOf(lines, /plantstore import/))
  })

  test('the check of the systemd unit in a checkout passes as written', async (t) => {
    const check = shellOf('Running under systemd').filter((line) => line.includes('systemd-analyze verify'))
    assert.equal(check.length, 1, 'one in-place check')
    const run = promisify(execFile)
    if ((await run('bash', ['-c', 'command -v systemd-analyze || true'])).stdout === '') {
      t.diagnostic('systemd-analyze is not installed here: the check was not run')
      return
    }
    const { stdout, stderr } = await run('bash', ['-c', `set -e; ${check[0]!}`], { cwd: REPO_ROOT })
    assert.equal(stdout + stderr, '', 'no output is a pass')
  })
})
