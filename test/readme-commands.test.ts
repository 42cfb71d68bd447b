import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { promisify } from 'node:util'
import { cleanup, REPO_ROOT, tempDatabase } from './helpers/server-process.js'

after(cleanup)

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')

/** Every `npx plantstore …` the README shows in running text that needs no server, once each. */
const COMMANDS = [...new Set([...README.matchAll(/`(npx plantstore [^`<>]+)`/g)].map((match) => match[1]!))].filter(
  (command) => !/ serve(?! --help)/.test(command),
)

test('the README shows the first-token command and the serve help in running text', () => {
  assert.ok(COMMANDS.includes('npx plantstore tokens create --account default'), COMMANDS.join('\n'))
  assert.ok(COMMANDS.includes('npx plantstore serve --help'), COMMANDS.join('\n'))
})

for (const command of COMMANDS) {
  test(`runs as written in this repository: ${command}`, async () => {
    const database = `sqlite:${tempDatabase()}`
    const [program, ...args] = command.split(' ')
    const env = { ...process.env, DATABASE_URL: database }
    const { stdout } = await promisify(execFile)(program!, args, { cwd: REPO_ROOT, env, timeout: 60_000 })
    assert.notEqual(stdout, '')
  })
}
