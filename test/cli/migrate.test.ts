import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { chmodSync, mkdirSync } from 'node:fs'
import { userInfo } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import Database from 'better-sqlite3'
import { CONFIG_KEYS } from '../../src/config.js'
import { migrations } from '../../src/storage/sqlite/migrations.js'
import { backends, type TestDatabase } from '../helpers/backends.js'
import {
  cleanup,
  http,
  plantstoreCommand,
  REPO_ROOT,
  runCli,
  startServer,
  tempDatabase,
  tempDir,
  type CliResult,
} from '../helpers/server-process.js'

after(cleanup)

// Every version this release carries, as the CLI lists them.
const ALL = migrations.map((migration) => migration.version).join(', ')

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

    test('applies every migration to a fresh database and prints so, then says it is up to date', async () => {
      const url = await freshDatabase()
      // The test databases have no password, so the URL is printed as given (redaction: test/redact.test.ts).
      const first = await runCli(['migrate', '--database', url])
      assert.equal(first.code, 0, first.stderr)
      assert.equal(first.stdout, `plantstore: applied migration(s) ${ALL} to ${url}\n`)
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
      assert.match(migrated.stdout, new RegExp(`^plantstore: applied migration\\(s\\) ${ALL} to `))

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

// Root may write anywhere: as root, the suite runs these commands as nobody (setpriv), where permissions deny.
const AS_ROOT = process.getuid!() === 0
const USER = AS_ROOT ? 'nobody (uid 65534)' : `${userInfo().username} (uid ${process.getuid!()})`

/** `plantstore ...args` as a user permissions apply to: its exit status and stderr. */
async function runAsUser(args: string[]): Promise<CliResult> {
  const env = { ...process.env }
  for (const key of CONFIG_KEYS) delete env[key]
  const command = plantstoreCommand(args)
  const [file, ...rest] = AS_ROOT
    ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', ...command]
    : command
  try {
    const { stdout, stderr } = await promisify(execFile)(file!, rest, { cwd: REPO_ROOT, env })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string }
    return { code, stdout, stderr }
  }
}

describe('plantstore migrate on a store it may not write', { concurrency: true }, () => {
  let locked: string
  let open: string
  before(() => {
    const dir = tempDir()
    // Others may look in: the user the commands run as, when not the suite's own.
    chmodSync(dir, 0o755)
    // A folder that user may not create files in, holding a readable store; another one it may.
    locked = join(dir, 'locked')
    mkdirSync(locked)
    new Database(join(locked, 'store.db')).close()
    chmodSync(join(locked, 'store.db'), 0o644)
    chmodSync(locked, 0o555)
    open = join(dir, 'open')
    mkdirSync(open)
    chmodSync(open, 0o777)
    new Database(join(open, 'store.db')).close()
    // Readable by that user, not writable.
    chmodSync(join(open, 'store.db'), 0o444)
  })

  const folderDenied = (folder: string) =>
    `permission denied: user ${USER} may not create files in the folder ${folder} (SQLite keeps the store and its -wal and -shm files there)`

  for (const [name, store, problem] of [
    ['a new store in a folder it may not write', () => join(locked, 'new.db'), () => folderDenied(locked)],
    [
      'a new store in a new folder in a folder it may not write',
      () => join(locked, 'sub', 'new.db'),
      () => folderDenied(locked),
    ],
    ['a store it may read in a folder it may not write', () => join(locked, 'store.db'), () => folderDenied(locked)],
    [
      'a store it may only read in a folder it may write',
      () => join(open, 'store.db'),
      () => `permission denied: user ${USER} may not read and write the file ${join(open, 'store.db')}`,
    ],
  ] as const) {
    test(`exits 1 naming the user, the folder or file and the permission problem: ${name}`, async () => {
      const result = await runAsUser(['migrate', '--database', `sqlite:${store()}`])
      assert.deepEqual(result, {
        code: 1,
        stdout: '',
        stderr: `plantstore: DATABASE_URL: cannot open sqlite:${store()}: ${problem()}\n`,
      })
    })
  }
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
