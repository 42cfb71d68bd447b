import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { cleanup, http, spawnPlantstore, startServer, tempDatabase, WAIT_MS } from '../helpers/server-process.js'
import { serveOnTerminal } from '../helpers/terminal.js'

after(cleanup)

const TOKEN = /pst_[A-Za-z0-9_-]{43}/

/** The entries of what a server printed on stdout, each line parsed as JSON (failing on any that is not). */
function jsonLines(stdout: string): Record<string, unknown>[] {
  return stdout
    .trimEnd()
    .split('\n')
    .map((line) => {
      assert.doesNotThrow(() => JSON.parse(line), `a JSON line: ${line}`)
      return JSON.parse(line) as Record<string, unknown>
    })
}

test('not on a terminal, shows the first token once as a JSON log line among JSON lines', async () => {
  const server = await startServer()
  try {
    await server.waitForStdout(TOKEN)
    await server.settle()
    const shown = jsonLines(server.stdout).filter((entry) => 'token' in entry)
    assert.equal(shown.length, 1)
    const { token, ...rest } = shown[0]!
    assert.match(String(token), new RegExp(`^${TOKEN.source}$`))
    assert.equal(rest.level, 30)
    assert.equal(rest.account, 'default')
    assert.deepEqual(rest.scopes, ['plants:read', 'plants:write'])
    assert.equal(rest.msg, 'this store had no API tokens, so one was created; it is shown only this once')
    assert.equal((await http(server.baseUrl, 'GET', '/plants', { token: String(token) })).status, 200)
  } finally {
    await server.stop('SIGKILL')
  }
})

test('not on a terminal, shows the first token even when LOG_LEVEL leaves out info lines', async () => {
  const args = ['serve', '--port', '0', '--host', '127.0.0.1', '--database', tempDatabase()]
  const child = spawnPlantstore(args, { LOG_LEVEL: 'error' })
  let stdout = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no token within ${WAIT_MS} ms: ${stdout}`)), WAIT_MS)
    child.stdout!.on('data', (chunk: string) => {
      stdout += chunk
      if (TOKEN.test(stdout) && stdout.endsWith('\n')) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  child.kill('SIGKILL')
  const [entry, ...others] = jsonLines(stdout)
  assert.deepEqual(others, [], 'the only line at this level')
  assert.match(String(entry!.token), new RegExp(`^${TOKEN.source}$`))
})

test('on a terminal, shows the first token once in a banner a person reads, with a curl line to try it', async () => {
  const output = (await serveOnTerminal(/Try it: .*\/plants\r?\n/)).replaceAll('\r\n', '\n')
  const banner = output.slice(output.indexOf('plantstore: this store had no API tokens'))
  assert.match(banner, /^plantstore: this store had no API tokens, so one was created for account "default"\n/)
  assert.match(
    banner,
    /with scopes plants:read and plants:write\. It is shown only this once; keep it somewhere safe:\n/,
  )
  const token = new RegExp(`\n\n    (${TOKEN.source})\n\n`).exec(banner)?.[1]
  assert.ok(token !== undefined, `the token on a line of its own:\n${banner}`)
  assert.match(
    banner,
    new RegExp(`Try it: {2}curl -H "Authorization: Bearer ${token}" http://127\\.0\\.0\\.1:\\d+/plants\n`),
  )
  assert.doesNotMatch(output, /"token":/, 'no JSON line with the token besides')
})
