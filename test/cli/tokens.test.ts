import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { after, before, describe, test } from 'node:test'
import { issueToken } from '../../src/auth/issue-token.js'
import { backends, freshStorage, type TestDatabase } from '../helpers/backends.js'
import {
  cleanup,
  eventually,
  http,
  plantstoreCommand,
  REPO_ROOT,
  runCli,
  startServer,
  tempDatabase,
  type CliResult,
  type HttpResult,
  type ServerProcess,
} from '../helpers/server-process.js'

after(cleanup)

interface CreatedToken extends CliResult {
  secret: string
  id: string
  /** When the CLI process was started and when it exited: the token was created in between. */
  startedAt: number
  exitedAt: number
}

/** The WWW-Authenticate challenge and the catalogue error of a refused request. */
function assertRefused(res: HttpResult, status: number, error: number, challenge: RegExp): void {
  assert.equal(res.status, status, res.text)
  assert.match(res.headers.get('www-authenticate') ?? '', challenge)
  assert.equal((JSON.parse(res.text) as { error: number }).error, error)
}

/** Exit status 1, nothing on stdout, and one line on stderr naming `flag` first. */
function assertUsageError(result: CliResult, flag: string): void {
  assert.equal(result.code, 1, `exit code; stderr: ${result.stderr}`)
  assert.equal(result.stdout, '')
  const lines = result.stderr.trimEnd().split('\n')
  assert.equal(lines.length, 1, `one line on stderr, got:\n${result.stderr}`)
  assert.ok(lines[0]!.startsWith(`plantstore: ${flag}: `), lines[0])
}

for (const backend of backends) {
  describe(`plantstore tokens, against a running server on the same database (${backend.name})`, () => {
    let testDatabase: TestDatabase
    let database: string
    let server: ServerProcess
    let readOnly: CreatedToken

    async function createToken(...args: string[]): Promise<CreatedToken> {
      const startedAt = Date.now()
      const result = await runCli(['tokens', 'create', ...args, '--database', database])
      const exitedAt = Date.now()
      assert.equal(result.code, 0, result.stderr)
      const id = /^Created (tok_[0-9a-f]{16}) /m.exec(result.stderr)?.[1]
      assert.ok(id !== undefined, `token id on stderr: ${result.stderr}`)
      return { ...result, secret: result.stdout.split('\n')[0]!, id, startedAt, exitedAt }
    }

    const listPlants = (token: string) => http(server.baseUrl, 'GET', '/plants', { token })
    const tokensList = (...args: string[]) => runCli(['tokens', 'list', ...args, '--database', database])

    before(async () => {
      testDatabase = await backend.createDatabase()
      database = testDatabase.url
      server = await startServer({ database })
      readOnly = await createToken('--account', 'acme', '--scope', 'plants:read', '--label', 'ci')
    })
    after(async () => {
      await server.stop('SIGKILL')
      await testDatabase.dispose()
    })

    test("prints a new token alone on stdout's first line and the details on stderr", () => {
      assert.match(readOnly.stdout, /^pst_[A-Za-z0-9_-]{43}\n$/)
      assert.match(readOnly.stderr, /^Created tok_[0-9a-f]{16} for account acme, scopes plants:read, never expires\.$/m)
      assert.ok(!readOnly.stderr.includes(readOnly.secret), 'the secret is only on stdout')
    })

    test('a read-only token lists plants at once but gets 403 insufficient_scope on POST', async () => {
      const listed = await listPlants(readOnly.secret)
      assert.equal(listed.status, 200, listed.text)
      assert.deepEqual(JSON.parse(listed.text), [])
      const created = await http(server.baseUrl, 'POST', '/plants', {
        token: readOnly.secret,
        body: { id: 1, name: 'Nope' },
      })
      assertRefused(created, 403, 40301, /error="insufficient_scope"/)
      assert.match(created.headers.get('www-authenticate')!, /scope="plants:write"/)
    })

    test('gives a token both scopes when no --scope is given', async () => {
      const token = await createToken('--account', 'both-scopes')
      assert.match(token.stderr, /scopes plants:read plants:write,/)
      const created = await http(server.baseUrl, 'POST', '/plants', {
        token: token.secret,
        body: { id: 1, name: 'Yes' },
      })
      assert.equal(created.status, 200, created.text)
      assert.deepEqual(JSON.parse((await listPlants(token.secret)).text), [{ name: 'Yes' }])
    })

    test('lists id, account, scopes and label of each token and never a secret', async () => {
      const result = await tokensList()
      assert.equal(result.code, 0, result.stderr)
      const lines = result.stdout.trimEnd().split('\n')
      assert.match(lines[0]!, /^ID\s+ACCOUNT\s+SCOPES\s+STATUS\s+CREATED\s+EXPIRES\s+MADE BY\s+LABEL$/)
      const row = lines.find((line) => line.startsWith(readOnly.id + ' '))
      assert.ok(row !== undefined, `a row for ${readOnly.id} in:\n${result.stdout}`)
      assert.match(row, /^tok_[0-9a-f]{16}\s+acme\s+plants:read\s+active\s+\S+\s+-\s+-\s+ci$/)
      // The server's bootstrap token is listed too, under account default.
      assert.ok(
        lines.some((line) => /^tok_[0-9a-f]{16}\s+default\s+plants:read,plants:write\s+active\s/.test(line)),
        result.stdout,
      )
      for (const output of [result.stdout, result.stderr]) {
        assert.ok(!output.includes(readOnly.secret), 'secret printed by tokens list')
        assert.ok(!output.includes('pst_'), 'token prefix printed by tokens list')
      }
    })

    test('lists only the tokens of the account given with --account', async () => {
      const result = await tokensList('--account', 'acme')
      assert.equal(result.code, 0, result.stderr)
      const rows = result.stdout.trimEnd().split('\n').slice(1)
      assert.ok(rows.length >= 1, result.stdout)
      for (const row of rows) assert.match(row, /^tok_[0-9a-f]{16}\s+acme\s/)
      assert.ok(rows.some((row) => row.startsWith(readOnly.id + ' ')))
      assert.ok(!result.stdout.includes('default'), 'the bootstrap token of account default is filtered out')
    })

    test('a revoked token is refused by the running server within 5 seconds', async () => {
      const token = await createToken('--account', 'acme', '--label', 'revoke-me')
      // Used once first, so the server has it cached as valid.
      assert.equal((await listPlants(token.secret)).status, 200)

      const revoked = await runCli(['tokens', 'revoke', token.id, '--database', database])
      assert.equal(revoked.code, 0, revoked.stderr)
      assert.equal(revoked.stdout, '')
      assert.match(revoked.stderr, new RegExp(`^Revoked ${token.id}\\.$`, 'm'))

      let last: HttpResult | undefined
      await eventually(async () => {
        last = await listPlants(token.secret)
        return last.status !== 200
      }, 5000)
      assertRefused(last!, 401, 40102, /error="invalid_token"/)
      assert.match(last!.text, /revoked/)

      const listed = await tokensList('--account', 'acme')
      assert.match(listed.stdout, new RegExp(`^${token.id}\\s+acme\\s+\\S+\\s+revoked\\s`, 'm'))
    })

    /** A chain of tokens of account `account`: a from the CLI, m made by a over HTTP, c by m, g by c. */
    async function chain(account: string) {
      const a = await createToken('--account', account, '--scope', 'plants:read', '--scope', 'tokens:manage')
      const make = async (secret: string, scopes: string[]) => {
        const res = await http(server.baseUrl, 'POST', '/tokens', { token: secret, body: { scopes } })
        assert.equal(res.status, 201, res.text)
        return JSON.parse(res.text) as { id: string; secret: string }
      }
      const m = await make(a.secret, ['plants:read', 'tokens:manage'])
      const c = await make(m.secret, ['plants:read', 'tokens:manage'])
      const g = await make(c.secret, ['plants:read'])
      return { a, m, c, g }
    }

    test('tokens list names in MADE BY the token that made each over HTTP, - for one made with the CLI', async () => {
      const { a, m, c, g } = await chain('made-by')
      const listed = await tokensList('--account', 'made-by')
      for (const [token, maker] of [
        [a.id, '-'],
        [m.id, a.id],
        [c.id, m.id],
        [g.id, c.id],
      ]) {
        assert.match(
          listed.stdout,
          new RegExp(`^${token}\\s+made-by\\s+\\S+\\s+active\\s+\\S+\\s+\\S+\\s+${maker}\\s*$`, 'm'),
        )
      }
    })

    test('revoking a token ends the tokens it made over HTTP, transitively, on the running server', async () => {
      const { a, m, c, g } = await chain('lineage')
      assert.equal((await listPlants(g.secret)).status, 200)
      const revoked = await runCli(['tokens', 'revoke', m.id, '--database', database])
      assert.equal(revoked.code, 0, revoked.stderr)
      let last: HttpResult | undefined
      await eventually(async () => {
        last = await listPlants(g.secret)
        return last.status !== 200
      }, 5000)
      assertRefused(last!, 401, 40102, /error="invalid_token"/)
      assertRefused(await listPlants(c.secret), 401, 40102, /error="invalid_token"/)
      assert.equal((await listPlants(a.secret)).status, 200, 'the maker of the revoked token keeps working')
      const after = await tokensList('--account', 'lineage')
      for (const token of [m.id, c.id, g.id]) {
        assert.match(after.stdout, new RegExp(`^${token}\\s+lineage\\s+\\S+\\s+revoked\\s`, 'm'))
      }
    })

    test('revoking an unknown token id exits 1 naming TOKEN_ID', async () => {
      const result = await runCli(['tokens', 'revoke', 'tok_0000000000000000', '--database', database])
      assertUsageError(result, 'TOKEN_ID')
    })

    test('a token created with --expires-in 2s works at once and is refused once it has expired', async () => {
      const token = await createToken('--account', 'acme', '--expires-in', '2s')
      const expires = /expires (\S+)\.$/m.exec(token.stderr)?.[1]
      assert.ok(expires !== undefined, token.stderr)
      const expiresAt = Date.parse(expires)
      assert.ok(expiresAt >= token.startedAt + 2000 && expiresAt <= token.exitedAt + 2000, `expires ${expires}`)

      assert.equal((await listPlants(token.secret)).status, 200)
      await new Promise((resolve) => setTimeout(resolve, token.exitedAt + 2500 - Date.now()))
      const refused = await listPlants(token.secret)
      assertRefused(refused, 401, 40102, /error="invalid_token"/)
      assert.match(refused.text, /expired/)
    })

    test('accounts are isolated: B neither lists nor deletes the plant A created', async () => {
      const [a, b] = await Promise.all([createToken('--account', 'iso-a'), createToken('--account', 'iso-b')])
      const created = await http(server.baseUrl, 'POST', '/plants', {
        token: a.secret,
        body: { id: 7, name: 'Ficus of A' },
      })
      assert.equal(created.status, 200, created.text)

      assert.deepEqual(JSON.parse((await listPlants(b.secret)).text), [])
      const deleted = await http(server.baseUrl, 'DELETE', '/plants/7', { token: b.secret })
      assert.equal(deleted.status, 404, deleted.text)
      assert.equal((JSON.parse(deleted.text) as { error: number }).error, 40401)
      // B may use the same id for a plant of its own: ids are per account.
      const own = await http(server.baseUrl, 'POST', '/plants', {
        token: b.secret,
        body: { id: 7, name: 'Ficus of B' },
      })
      assert.equal(own.status, 200, own.text)

      assert.deepEqual(JSON.parse((await listPlants(a.secret)).text), [{ name: 'Ficus of A' }])
      assert.deepEqual(JSON.parse((await listPlants(b.secret)).text), [{ name: 'Ficus of B' }])
    })
  })
}

describe('plantstore tokens create, invalid input', { concurrency: true }, () => {
  const database = tempDatabase()
  const create = (...args: string[]) => runCli(['tokens', 'create', ...args, '--database', database])

  test('exits 1 naming --account when it is missing', async () => {
    assertUsageError(await create('--scope', 'plants:read'), '--account')
  })

  test('exits 1 naming --scope for an unknown scope', async () => {
    assertUsageError(await create('--account', 'acme', '--scope', 'plants:admin'), '--scope')
  })

  test('exits 1 naming --expires-in for a bad duration', async () => {
    assertUsageError(await create('--account', 'acme', '--expires-in', '1y'), '--expires-in')
  })
})

describe('plantstore --help', { concurrency: true }, () => {
  for (const [args, mentions] of [
    [['--help'], /serve[\s\S]*tokens/],
    [['serve', '--help'], /--port[\s\S]*--database/],
    [['tokens', '--help'], /tokens create[\s\S]*tokens list[\s\S]*tokens revoke/],
    // A command that does nothing without a subcommand answers with its help.
    [['tokens'], /tokens create[\s\S]*tokens list[\s\S]*tokens revoke/],
    [['webhooks'], /webhooks add[\s\S]*webhooks list[\s\S]*webhooks deliveries/],
  ] as const) {
    test(`plantstore ${args.join(' ')} prints usage and exits 0`, async () => {
      const result = await runCli([...args])
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /^Usage:/m)
      assert.match(result.stdout, mentions)
      assert.equal(result.stderr, '')
    })
  }
})

describe('plantstore tokens list into a pipe', () => {
  test('ends quietly, exit 0, when its reader stops early (| head)', async () => {
    // Far more than a pipe holds: the listing is still writing when head has exited.
    const fresh = await freshStorage(backends[0]!)
    try {
      for (let i = 0; i < 700; i++)
        await issueToken(fresh.storage, { accountName: `grower-${i}`, label: 'x'.repeat(40) })
      const head = spawn('head', ['-n', '1'], { stdio: ['pipe', 'pipe', 'inherit'] })
      const [command, ...args] = plantstoreCommand(['tokens', 'list', '--database', fresh.url])
      const lister = spawn(command!, args, { cwd: REPO_ROOT, stdio: ['ignore', head.stdin, 'pipe'] })
      head.stdin.destroy()
      let headOut = ''
      head.stdout.setEncoding('utf8').on('data', (chunk: string) => (headOut += chunk))
      let stderr = ''
      lister.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
      const [[listCode], [headCode]] = await Promise.all([once(lister, 'close'), once(head, 'close')])
      assert.deepEqual([listCode, headCode, stderr], [0, 0, ''])
      assert.match(headOut, /^ID +ACCOUNT/)
    } finally {
      await fresh.dispose()
    }
  })
})
