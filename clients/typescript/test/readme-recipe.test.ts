import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { promisify } from 'node:util'
import { randomBytes } from 'node:crypto'
import { cleanup, REPO_ROOT, startServer, tempDir } from '../../../test/helpers/server-process.js'

after(cleanup)

const README = readFileSync(join(REPO_ROOT, 'clients', 'typescript', 'README.md'), 'utf8')

test("the README's new-project recipe runs as written: a fresh ES module project creates and lists a plant", async () => {
  const recipe = /## In a new project\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(README)?.[1]
  assert.ok(recipe, 'the README has a sh block under "In a new project"')
  const token = 'pst_' + randomBytes(32).toString('base64url')
  const server = await startServer({ env: { PLANTSTORE_BOOTSTRAP_TOKEN: token } })
  try {
    const project = tempDir()
    const env = { ...process.env, REPO: REPO_ROOT, BASE_URL: server.baseUrl, TOKEN: token }
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', recipe], {
      cwd: project,
      env,
      timeout: 240_000,
    })
    assert.equal(stdout.trim().split('\n').at(-1), '1n Monstera', stdout)
    assert.ok(existsSync(join(project, 'node_modules', '@plantstore', 'client', 'dist', 'index.js')))
  } finally {
    await server.stop()
  }
})

test('git ignores the tarball npm pack leaves in the checkout', async () => {
  const { stdout } = await promisify(execFile)('git', ['check-ignore', 'plantstore-client-0.1.0.tgz'], {
    cwd: REPO_ROOT,
  })
  assert.equal(stdout.trim(), 'plantstore-client-0.1.0.tgz')
})
