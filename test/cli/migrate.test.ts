import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { backends, type TestDatabase } from '../helpers/backends.js'
import { cleanup, http, runCli, startServer, tempDatabase, type CliResult } from '../helpers/server-process.js'

after(cleanup)

/** Exit status 1 and exactly one line on stderr, naming `key` first. */
function assertConfigError(result: CliResult, key: string): string {
  assert.equal(result.code, 1, `exit code; stderr: ${result.stderr}`)
  const lines = result.stderr.trimEnd().split('\n')
  assert.equal(lines.length, 1, `one line on stderr, got:\n${result.stderr}`)
  assert.ok(lines[0]!.startsWith(`plantstore: ${key}: `), lines[0])
  return lines[0]!
}

for (const backend of backends) {
  describe(`plantstore migrate (${backend.name})`, () => {
    const databases: TestDatabase[] = []
    const freshDatabase = async (): Promise<string> => {
      const database = await backend.createDatabase()
      databases.push(database)
      return database.url
    }
    after(async () => {
      await cleanup()
      for (const database of databases) await database.dispose()
    })

    test('applies every migration (1 to 4) to a fresh database and prints so, then says it is up to date', async () => {
      const url = await freshDatabase()
      // The test databases have no password, so the URL is printed as given (redaction: test/redact.test.ts).
      const first = await runCli(['migrate', '--database', url])
      assert.equal(first.code, 0, first.stderr)
      assert.equal(first.stdout, `plantstore: applied migration(s) 1, 2, 3, 4 to ${url}\n`)
      assert.equal(first.stderr, '')

      const second = await runCli(['migrate', '--database', url])
      assert.equal(second.code, 0, second.stderr)
      assert.equal(second.stdout, `plantstore: ${url} is up to date\n`)
      assert.equal(second.stderr, '')
    })

    test('serve with DATABASE_MIGRATE_ON_START=false refuses a fresh database, and starts once migrate has run', async () => {
      const url = await freshDatabase()
      const env = { DATABASE_MIGRATE_ON_START: 'false' }
      const refused = await runCli(['serve', '--port', '0', '--host', '127.0.0.1', '--database', url], env)
      const line = assertConfigError(refused, 'DATABASE_MIGRATE_ON_START')
      assert.match(line, /plantstore migrate/)
      assert.doesNotMatch(refused.stdout, /Server listening|pst_/)

      // The refused start changed nothing: migrate still has every migration to apply.
      const migrated = await runCli(['migrate', '--database', url])
      assert.equal(migrated.code, 0, migrated.stderr)
      assert.match(migrated.stdout, /^plantstore: applied migration\(s\) 1, 2, 3, 4 to /)

      const server = await startServer({ database: url, env })
      const health = await http(server.baseUrl, 'GET', '/healthz')
      assert.equal(health.status, 200, health.text)
      assert.deepEqual(JSON.parse(health.text), { status: 'ok' })
      // The schema serves: the first start seeded a token that lists the (empty) store.
      const [token] = await server.waitForStdout(/pst_[A-Za-z0-9_-]{43}/)
      const listed = await http(server.baseUrl, 'GET', '/plants', { token })
      assert.equal(listed.status, 200, listed.text)
      assert.deepEqual(JSON.parse(listed.text), [])
      assert.equal(await server.stop('SIGTERM'), 0)
    })
  })
}

describe('plantstore migrate --help', () => {
  test('prints usage naming --database and exits 0', async () => {
    const result = await runCli(['migrate', '--help'])
    assert.equal(result.code, 0, result.stderr)
    assert.match(result.stdout, /^Usage: plantstore migrate \[--database URL\]$/m)
    assert.match(result.stdout, /DATABASE_MIGRATE_ON_START=false/)
    assert.equal(result.stderr, '')
  })
})

describe('plantstore migrate, invalid usage', () => {
  test('exits 1 with one line naming an unknown flag', async () => {
    const result = await runCli(['migrate', '--bogus'])
    assert.equal(result.code, 1)
    assert.equal(result.stdout, '')
    assert.match(result.stderr, /^plantstore: .*--bogus.*\n$/)
  })

  test('tokens list exits 1 naming DATABASE_MIGRATE_ON_START on an unmigrated database it may not migrate', async () => {
    const result = await runCli(['tokens', 'list', '--database', tempDatabase()], {
      DATABASE_MIGRATE_ON_START: 'false',
    })
    assert.match(assertConfigError(result, 'DATABASE_MIGRATE_ON_START'), /plantstore migrate/)
  })

  test('exits 1 naming DATABASE_URL for a URL of an unknown kind', async () => {
    assertConfigError(await runCli(['migrate', '--database', 'mysql://db/x']), 'DATABASE_URL')
  })
})

// Needs no server: nothing listens on port 1.
describe('plantstore with an unreachable PostgreSQL', { concurrency: true }, () => {
  // Nothing listens on port 1; the password must not reach the error line.
  const unreachable = 'postgres://user:secretpw@127.0.0.1:1/x'
  for (const args of [
    ['serve', '--port', '0', '--host', '127.0.0.1', '--database', unreachable],
    ['migrate', '--database', unreachable],
  ]) {
    test(`plantstore ${args[0]} exits 1 within 10 s with one line naming DATABASE_URL, without the password`, async () => {
      const started = Date.now()
      const result = await runCli(args, {}, 10_000)
      assert.ok(Date.now() - started < 10_000)
      const line = assertConfigError(result, 'DATABASE_URL')
      assert.ok(!line.includes('secretpw'), line)
      assert.ok(!result.stdout.includes('secretpw'), result.stdout)
      assert.doesNotMatch(result.stdout, /Server listening/)
    })
  }
})
