import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'patch-postgres.js')
const INSTALLED = join(import.meta.dirname, '..', '..', 'node_modules', 'postgres')
const HOLDS = 'setImmediate(nextWrite)'
const files = (root: string) => ['src', 'cjs/src'].map((dir) => readFileSync(join(root, dir, 'connection.js'), 'utf8'))

describe('scripts/patch-postgres.js', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-patch-'))
  after(() => rmSync(dir, { recursive: true, force: true }))

  /** The script beside a copy of the installed client, which it then patches instead of the project's. */
  const sandbox = (name: string) => {
    const root = join(dir, name)
    cpSync(SCRIPT, join(root, 'patch-postgres.js'))
    cpSync(INSTALLED, join(root, 'node_modules', 'postgres'), { recursive: true })
    return { script: join(root, 'patch-postgres.js'), client: join(root, 'node_modules', 'postgres') }
  }

  test('npm install leaves the client writing each message through, in both of its builds', () => {
    for (const text of files(INSTALLED)) assert.ok(!text.includes(HOLDS), 'run npm install: its postinstall patches it')
  })

  test('--published copies the client as published, which the install turns back into what it installs', () => {
    const { script, client } = sandbox('published')
    const copy = join(dir, 'copy')
    execFileSync(process.execPath, [script, '--published', copy])
    for (const text of files(copy)) assert.ok(text.includes(HOLDS) && !text.includes('plantstore'))
    rmSync(client, { recursive: true })
    cpSync(copy, client, { recursive: true })
    execFileSync(process.execPath, [script])
    assert.deepEqual(files(client), files(INSTALLED))
    execFileSync(process.execPath, [script])
    assert.deepEqual(files(client), files(INSTALLED), 'a second run changes nothing')
  })

  test('answers anything but no arguments or --published DIR with its usage and status 2, changing nothing', () => {
    const { script, client } = sandbox('usage')
    const before = files(client)
    for (const args of [['--published'], ['--publish', join(dir, 'x')], ['extra']]) {
      const run = spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' })
      assert.equal(run.status, 2, args.join(' '))
      assert.equal(run.stderr, 'usage: node scripts/patch-postgres.js [--published DIR]\n')
    }
    assert.deepEqual(files(client), before)
  })

  test('stops with one line and status 1 when the installed client is not the text it was written for', () => {
    const { script, client } = sandbox('other')
    execFileSync(process.execPath, [script, '--published', join(client, '..', 'pristine')])
    const file = join(client, 'src', 'connection.js')
    writeFileSync(
      file,
      readFileSync(join(client, '..', 'pristine', 'src', 'connection.js'), 'utf8').replace('1024', '2048'),
    )
    const run = spawnSync(process.execPath, [script], { encoding: 'utf8' })
    assert.equal(run.status, 1)
    assert.match(run.stderr, /^scripts\/patch-postgres\.js: postgres [0-9.]+ is not the client this was written for/)
    assert.equal(run.stderr.trim().split('\n').length, 1)
  })
})
