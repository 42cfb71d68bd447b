import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { after, before, describe, test } from 'node:test'
import { backends, type TestDatabase } from '../helpers/backends.js'
import { parseExact } from '../helpers/json.js'
import {
  cleanup,
  http,
  runCli,
  startServer,
  tempDatabase,
  tempDir,
  type CliResult,
  type HttpResult,
  type ServerProcess,
} from '../helpers/server-process.js'

// A generated token: the prefix and 32 random bytes in base64url, not glued to other token characters.
const TOKEN = /(?<![A-Za-z0-9_-])pst_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/

const databases: TestDatabase[] = []
/** Keeps a test database until the file's end, after its servers are gone. */
function disposeLater(database: TestDatabase): void {
  databases.push(database)
}

after(async () => {
  await cleanup()
  for (const database of databases) await database.dispose()
})

function assertErrorBody(res: HttpResult, status: number, error: number): void {
  assert.equal(res.status, status, res.text)
  const body = JSON.parse(res.text) as Record<string, unknown>
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message'])
  assert.equal(body.error, error)
  assert.equal(typeof body.message, 'string')
}

/** Exit status 1 and exactly one line on stderr, naming `key` first. */
function assertConfigError(result: CliResult, key: string): void {
  assert.equal(result.code, 1, `exit code; stderr: ${result.stderr}`)
  const lines = result.stderr.trimEnd().split('\n')
  assert.equal(lines.length, 1, `one line on stderr, got:\n${result.stderr}`)
  assert.match(lines[0]!, new RegExp(`^plantstore: ${key}: `))
}

for (const backend of backends) {
  describe(`plantstore serve, first start on an empty store (${backend.name})`, () => {
    let database: TestDatabase
    let server: ServerProcess
    let token: string

    before(async () => {
      database = await backend.createDatabase()
      server = await startServer({ database: database.url })
      token = (await server.waitForStdout(TOKEN))[0]
    })
    after(async () => {
      await server.stop('SIGKILL')
      await database.dispose()
    })

    test('prints a bootstrap token that creates (again with a key), lists, reads and deletes plants as the README walk-through shows', async () => {
      const { baseUrl } = server
      const monstera = await http(baseUrl, 'POST', '/plants', {
        token,
        body: { id: 1, name: 'Monstera', tag: 'tropical' },
      })
      assert.equal(monstera.status, 200, monstera.text)
      assert.deepEqual(JSON.parse(monstera.text), { name: 'Monstera', tag: 'tropical' })
      const fern = await http(baseUrl, 'POST', '/plants', { token, body: { id: 2, name: 'Fern' } })
      assert.equal(fern.status, 200, fern.text)
      assert.deepEqual(JSON.parse(fern.text), { name: 'Fern' })

      const listed = await http(baseUrl, 'GET', '/plants?limit=2', { token })
      assert.equal(listed.status, 200, listed.text)
      assert.deepEqual(JSON.parse(listed.text), [{ name: 'Monstera', tag: 'tropical' }, { name: 'Fern' }])

      const one = await http(baseUrl, 'GET', '/plants/2', { token })
      assert.equal(one.status, 200, one.text)
      assert.equal(one.text, '{"name":"Fern"}')

      const keyed = { token, body: { id: 3, name: 'Cactus' }, headers: { 'idempotency-key': '5b8f0f5e-cactus' } }
      const cactus = await http(baseUrl, 'POST', '/plants', keyed)
      assert.equal(cactus.text, '{"name":"Cactus"}')
      assert.equal(cactus.headers.get('idempotent-replayed'), null)
      const again = await http(baseUrl, 'POST', '/plants', keyed)
      assert.equal(again.text, '{"name":"Cactus"}')
      assert.equal(again.headers.get('idempotent-replayed'), 'true')

      const deleted = await http(baseUrl, 'DELETE', '/plants/2', { token })
      assert.equal(deleted.status, 204)
      assert.equal(deleted.text, '')
      assertErrorBody(await http(baseUrl, 'DELETE', '/plants/2', { token }), 404, 40401)
    })

    test('refuses requests without the token and with a different one', async () => {
      assertErrorBody(await http(server.baseUrl, 'GET', '/plants'), 401, 40101)
      const other = 'pst_' + randomBytes(32).toString('base64url')
      assertErrorBody(await http(server.baseUrl, 'GET', '/plants', { token: other }), 401, 40102)
    })

    test('sends X-Request-Id on every response and echoes a sane incoming one', async () => {
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
      for (const res of [
        await http(server.baseUrl, 'GET', '/plants', { token }),
        await http(server.baseUrl, 'GET', '/plants'),
        await http(server.baseUrl, 'GET', '/no-such-route'),
      ]) {
        assert.match(res.headers.get('x-request-id') ?? '', uuid)
      }
      const echoed = await http(server.baseUrl, 'GET', '/healthz', { headers: { 'x-request-id': 'trace-42.a:b' } })
      assert.equal(echoed.headers.get('x-request-id'), 'trace-42.a:b')
    })

    test('round-trips the int64 id 9223372036854775807 exactly over real HTTP', async () => {
      const max = '9223372036854775807'
      const below = '9223372036854775806'
      for (const [id, name] of [
        [max, 'Int64 max'],
        [below, 'Int64 max minus one'],
      ]) {
        const res = await http(server.baseUrl, 'POST', '/plants', {
          token,
          body: `{"id":${id},"name":"${name}","tag":"int64"}`,
        })
        assert.equal(res.status, 200, res.text)
      }

      const listed = await http(server.baseUrl, 'GET', '/plants?tag=int64&fields=id,name', { token })
      assert.equal(listed.status, 200, listed.text)
      // Raw text: JSON.parse would round both ids to 9223372036854775807 (2^63 as a double).
      assert.match(listed.text, new RegExp(`"id":${max}[,}]`))
      assert.match(listed.text, new RegExp(`"id":${below}[,}]`))
      assert.deepEqual(parseExact(listed.text), [
        { id: BigInt(below), name: 'Int64 max minus one' },
        { id: BigInt(max), name: 'Int64 max' },
      ])

      const deleted = await http(server.baseUrl, 'DELETE', `/plants/${max}`, { token })
      assert.equal(deleted.status, 204, deleted.text)
      const after = await http(server.baseUrl, 'GET', '/plants?tag=int64&fields=id,name', { token })
      assert.deepEqual(parseExact(after.text), [{ id: BigInt(below), name: 'Int64 max minus one' }])
    })

    test('stores one plant when 50 identical POSTs of an id race, and answers every one 200', async () => {
      const body = { id: 5000, name: 'Racing fig', tag: 'race-same' }
      const results = await Promise.all(
        Array.from({ length: 50 }, () => http(server.baseUrl, 'POST', '/plants', { token, body })),
      )
      for (const res of results) {
        assert.equal(res.status, 200, res.text)
        assert.deepEqual(JSON.parse(res.text), { name: 'Racing fig', tag: 'race-same' })
      }
      const listed = await http(server.baseUrl, 'GET', '/plants?tag=race-same&fields=id,name,tag', { token })
      assert.deepEqual(JSON.parse(listed.text), [body])
    })

    test('lets exactly one of 50 racing POSTs of an id with different names win, and stores its name', async () => {
      const names = Array.from({ length: 50 }, (_, i) => `racer ${i}`)
      const results = await Promise.all(
        names.map((name) =>
          http(server.baseUrl, 'POST', '/plants', { token, body: { id: 6000, name, tag: 'race-diff' } }),
        ),
      )
      const winners = names.filter((_, i) => results[i]!.status === 200)
      assert.equal(winners.length, 1, `statuses: ${results.map((res) => res.status).join(' ')}`)
      for (const res of results.filter((res) => res.status !== 200)) assertErrorBody(res, 409, 40901)

      const listed = await http(server.baseUrl, 'GET', '/plants?tag=race-diff&fields=id,name', { token })
      assert.deepEqual(JSON.parse(listed.text), [{ id: 6000, name: winners[0] }])
    })

    test('exits 1 with one line naming PORT when the port is already in use', async () => {
      const fresh = await backend.createDatabase()
      disposeLater(fresh)
      const database = fresh.url
      const result = await runCli([
        'serve',
        '--port',
        String(server.port),
        '--host',
        '127.0.0.1',
        '--database',
        database,
      ])
      assertConfigError(result, 'PORT')
      assert.doesNotMatch(result.stdout, /pst_/)
      assert.match(result.stderr, new RegExp(`\\b${server.port}\\b.*in use`))
      // The running server is unharmed.
      assert.equal((await http(server.baseUrl, 'GET', '/healthz')).status, 200)
      // The failed first start did not use up the bootstrap token: the next start still shows one.
      const retry = await startServer({ database })
      try {
        const [token] = await retry.waitForStdout(TOKEN)
        assert.equal((await http(retry.baseUrl, 'GET', '/plants', { token })).status, 200)
      } finally {
        await retry.stop('SIGKILL')
      }
    })
  })

  describe(`plantstore serve, stopping and restarting on the same database (${backend.name})`, () => {
    let database: string
    let first: ServerProcess
    let token: string

    before(async () => {
      const fresh = await backend.createDatabase()
      disposeLater(fresh)
      database = fresh.url
      first = await startServer({ database })
      token = (await first.waitForStdout(TOKEN))[0]
      const created = await http(first.baseUrl, 'POST', '/plants', { token, body: { id: 7, name: 'Survivor' } })
      assert.equal(created.status, 200, created.text)
    })
    after(() => first.stop('SIGKILL'))

    test('exits with code 0 on SIGTERM and stops answering', async () => {
      assert.equal(await first.stop('SIGTERM'), 0)
      assert.match(first.stdout, /"signal":"SIGTERM".*"shutting down"/)
      await assert.rejects(fetch(`${first.baseUrl}/healthz`))
    })

    test('prints no new token on a second start and still lists the plant created before', async () => {
      const second = await startServer({ database })
      try {
        await second.settle()
        assert.doesNotMatch(second.stdout, /pst_/)
        assert.doesNotMatch(second.stdout, /had no API tokens/)
        const listed = await http(second.baseUrl, 'GET', '/plants', { token })
        assert.equal(listed.status, 200, listed.text)
        assert.deepEqual(JSON.parse(listed.text), [{ name: 'Survivor' }])
      } finally {
        await second.stop('SIGKILL')
      }
    })
  })
}

describe('plantstore serve with PLANTSTORE_BOOTSTRAP_TOKEN', () => {
  test('seeds that token on an empty store and prints no generated one', async () => {
    const seeded = 'seeded-' + randomBytes(30).toString('base64url')
    const server = await startServer({ env: { PLANTSTORE_BOOTSTRAP_TOKEN: seeded } })
    try {
      await server.settle()
      assert.doesNotMatch(server.stdout, /pst_/)
      assert.doesNotMatch(server.stdout, /had no API tokens/)
      assert.ok(!server.stdout.includes(seeded), 'the seeded secret is never printed')

      const created = await http(server.baseUrl, 'POST', '/plants', { token: seeded, body: { id: 1, name: 'Seed' } })
      assert.equal(created.status, 200, created.text)
      const listed = await http(server.baseUrl, 'GET', '/plants', { token: seeded })
      assert.deepEqual(JSON.parse(listed.text), [{ name: 'Seed' }])
      const wrong = await http(server.baseUrl, 'GET', '/plants', { token: seeded + 'x' })
      assertErrorBody(wrong, 401, 40102)
    } finally {
      await server.stop('SIGKILL')
    }
  })
})

describe('plantstore serve with bad configuration', { concurrency: true }, () => {
  test('exits 1 with one line naming DATABASE_URL when the database cannot be created', async () => {
    const result = await runCli(['serve', '--port', '0', '--database', 'sqlite:/proc/nonexistent/x.db'])
    assertConfigError(result, 'DATABASE_URL')
  })

  test('exits 1 with one line naming LOG_LEVEL for LOG_LEVEL=loud', async () => {
    const result = await runCli(['serve', '--port', '0', '--database', tempDatabase()], { LOG_LEVEL: 'loud' })
    assertConfigError(result, 'LOG_LEVEL')
    assert.match(result.stderr, /"loud"/)
  })

  test('exits 1 with one line naming PORT for PORT=99999', async () => {
    const result = await runCli(['serve', '--database', tempDatabase()], { PORT: '99999' })
    assertConfigError(result, 'PORT')
    assert.match(result.stderr, /"99999"/)
  })
})

describe('a misspelt setting', () => {
  test('stops every command that opens the store, DATABASE_URL unset: one line naming both, no default store made', async () => {
    const dir = tempDir()
    const commands = [
      ['serve', '--port', '0'],
      ['migrate'],
      ['tokens', 'list'],
      ['webhooks', 'list'],
      ['backup', join(dir, 'backup.db')],
      ['export'],
      ['import'],
    ]
    const env = { DATABSE_URL: 'postgres://plantstore:secret@127.0.0.1:9/production' }
    const results = await Promise.all(commands.map((args) => runCli(args, env, undefined, dir)))
    for (const [i, result] of results.entries()) {
      assert.deepEqual(
        { ...result, stderr: result.stderr.split('\n') },
        {
          code: 1,
          stdout: '',
          stderr: [
            'plantstore: DATABSE_URL: not a setting, and DATABASE_URL is not set; did you mean DATABASE_URL? ' +
              '(not opening the default sqlite:./data/plantstore.db instead: set DATABASE_URL, or give --database)',
            '',
          ],
        },
        commands[i]!.join(' '),
      )
    }
    assert.deepEqual(readdirSync(dir), [], 'no ./data/plantstore.db, no backup')
  })

  test('is named by other commands too: tokens create warns of DATABSE_URL, and goes on', async () => {
    const result = await runCli(
      ['tokens', 'create', '--account', 'default', '--database', `sqlite:${tempDatabase()}`],
      {
        DATABSE_URL: 'postgres://127.0.0.1/elsewhere',
      },
    )
    assert.equal(result.code, 0, result.stderr)
    assert.match(result.stdout, TOKEN)
    assert.equal(result.stderr.split('\n')[0], 'plantstore: DATABSE_URL: not a setting; did you mean DATABASE_URL?')
  })

  test('starts plantstore serve, with one warning line naming the variable and the setting it most likely meant', async () => {
    const server = await startServer({ env: { PLANTSTORE_RATELIMIT: '10', PLANTSTORE_TEST_ANYTHING: '1' } })
    try {
      const health = await http(server.baseUrl, 'GET', '/healthz')
      assert.equal(health.status, 200, health.text)
      assert.equal(
        server.stderr,
        'plantstore: PLANTSTORE_RATELIMIT: not a setting; did you mean PLANTSTORE_RATE_LIMIT?\n',
      )
    } finally {
      await server.stop('SIGKILL')
    }
  })
})

describe('plantstore serve with the idempotency settings', () => {
  test('keeps a key PLANTSTORE_IDEMPOTENCY_KEY_HOURS and refuses keys past PLANTSTORE_MAX_IDEMPOTENCY_KEYS_PER_ACCOUNT', async () => {
    const file = tempDatabase()
    const token = `pst_${randomBytes(32).toString('base64url')}`
    const server = await startServer({
      database: `sqlite:${file}`,
      env: {
        PLANTSTORE_BOOTSTRAP_TOKEN: token,
        PLANTSTORE_IDEMPOTENCY_KEY_HOURS: '3',
        PLANTSTORE_MAX_IDEMPOTENCY_KEYS_PER_ACCOUNT: '1',
      },
    })
    try {
      const create = (id: number, key: string) =>
        http(server.baseUrl, 'POST', '/plants', {
          token,
          body: { id, name: 'Fern' },
          headers: { 'idempotency-key': key },
        })
      const sent = Date.now()
      assert.equal((await create(1, 'first')).status, 200)
      assertErrorBody(await create(2, 'second'), 409, 40902)
      assert.equal((await create(1, 'first')).headers.get('idempotent-replayed'), 'true')
      const db = new Database(file, { readonly: true, fileMustExist: true })
      try {
        const expires = db.prepare('SELECT expires_at FROM idempotency_keys').pluck().all() as number[]
        assert.equal(expires.length, 1, 'the refused key was not kept')
        const hours = (expires[0]! - sent) / 3_600_000
        assert.ok(hours > 2.99 && hours < 3.01, `kept ${hours} hours`)
      } finally {
        db.close()
      }
    } finally {
      await server.stop('SIGKILL')
    }
  })
})
