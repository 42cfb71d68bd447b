import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { backends, type TestDatabase } from './helpers/backends.js'
import { serialOrder, type RacedOp } from './helpers/serial-order.js'
import {
  cleanup,
  eventually,
  http,
  runCli,
  startServer,
  type HttpResult,
  type ServerProcess,
} from './helpers/server-process.js'

// README: "a revoked one is refused within 2 seconds (servers trust a verified token for 2 s before
// reading it again)"; the token cache TTL in src/app.ts. The slack covers polling and two HTTP round trips.
const REVOCATION_BOUND_MS = 2000
const SLACK_MS = 1500

after(cleanup)

function errorCode(res: HttpResult): number {
  return (JSON.parse(res.text) as { error: number }).error
}

/** Creates a token with the CLI on `database` and returns its secret and id. */
async function cliToken(database: string, account: string): Promise<{ secret: string; id: string }> {
  const result = await runCli(['tokens', 'create', '--account', account, '--database', database])
  assert.equal(result.code, 0, result.stderr)
  const id = /^Created (tok_[0-9a-f]{16}) /m.exec(result.stderr)?.[1]
  assert.ok(id !== undefined, `token id on stderr: ${result.stderr}`)
  return { secret: result.stdout.split('\n')[0]!, id }
}

for (const backend of backends) {
  describe(`two plantstore servers on one ${backend.name} database`, () => {
    const seeded = 'scale-out-' + randomBytes(30).toString('base64url')
    let database: TestDatabase
    let a: ServerProcess
    let b: ServerProcess

    /** Every plant of the seeded token's account with `tag`, ids included, as one server lists them. */
    async function listed(server: ServerProcess, tag: string): Promise<{ id: number; name: string }[]> {
      const res = await http(server.baseUrl, 'GET', `/plants?tag=${tag}&fields=id,name&limit=1000`, { token: seeded })
      assert.equal(res.status, 200, res.text)
      assert.equal(res.headers.get('link'), null, 'everything on one page')
      return JSON.parse(res.text) as { id: number; name: string }[]
    }

    before(async () => {
      database = await backend.createDatabase()
      // Both first starts race on the empty store: migrations and the bootstrap token. No rate limit: the races below
      // send 200 requests of one token at once, past the default burst of 100 (limits are tested in test/limits/).
      const env = { PLANTSTORE_BOOTSTRAP_TOKEN: seeded, PLANTSTORE_RATE_LIMIT: '0' }
      ;[a, b] = await Promise.all([
        startServer({ database: database.url, env }),
        startServer({ database: database.url, env }),
      ])
      assert.notEqual(a.port, b.port)
      // The bootstrap token is created just after listening; wait until both servers accept it.
      await eventually(async () => {
        const answers = await Promise.all(
          [a, b].map((server) => http(server.baseUrl, 'GET', '/plants', { token: seeded })),
        )
        return answers.every((res) => res.status === 200)
      }, 10_000)
    })
    after(async () => {
      await cleanup()
      await database?.dispose()
    })

    test('a plant created through A is listed through B and deleted through B, and A then answers 404 for it', async () => {
      const body = { id: 1, name: 'Shared fern', tag: 'shared' }
      const created = await http(a.baseUrl, 'POST', '/plants', { token: seeded, body })
      assert.equal(created.status, 200, created.text)

      assert.deepEqual(await listed(b, 'shared'), [{ id: 1, name: 'Shared fern' }])

      const deleted = await http(b.baseUrl, 'DELETE', '/plants/1', { token: seeded })
      assert.equal(deleted.status, 204, deleted.text)
      const again = await http(a.baseUrl, 'DELETE', '/plants/1', { token: seeded })
      assert.equal(again.status, 404, again.text)
      assert.equal(errorCode(again), 40401)
      assert.deepEqual(await listed(a, 'shared'), [])
    })

    test('a token created by the CLI works on both servers at once', async () => {
      const { secret } = await cliToken(database.url, 'cli-both')
      const created = await http(a.baseUrl, 'POST', '/plants', { token: secret, body: { id: 7, name: 'Via A' } })
      assert.equal(created.status, 200, created.text)
      const onB = await http(b.baseUrl, 'GET', '/plants', { token: secret })
      assert.equal(onB.status, 200, onB.text)
      assert.deepEqual(JSON.parse(onB.text), [{ name: 'Via A' }])
    })

    test(`a token revoked with the CLI is refused by both servers within ${REVOCATION_BOUND_MS / 1000} s`, async (t) => {
      const { secret, id } = await cliToken(database.url, 'revoked-both')
      // Used on both just before revoking, so both hold it in their cache as valid.
      for (const server of [a, b]) {
        const res = await http(server.baseUrl, 'GET', '/plants', { token: secret })
        assert.equal(res.status, 200, res.text)
      }

      const revoked = await runCli(['tokens', 'revoke', id, '--database', database.url])
      assert.equal(revoked.code, 0, revoked.stderr)
      const revokedBy = Date.now()

      let answers: HttpResult[] = []
      await eventually(
        async () => {
          answers = await Promise.all([a, b].map((server) => http(server.baseUrl, 'GET', '/plants', { token: secret })))
          return answers.every((res) => res.status !== 200)
        },
        REVOCATION_BOUND_MS + SLACK_MS,
        100,
      )
      for (const res of answers) {
        assert.equal(res.status, 401, res.text)
        assert.equal(errorCode(res), 40102)
        assert.match(res.text, /revoked/)
      }
      const elapsed = Date.now() - revokedBy
      t.diagnostic(`refused by both ${elapsed} ms after tokens revoke exited`)
      assert.ok(elapsed < REVOCATION_BOUND_MS + SLACK_MS, `refused by both only after ${elapsed} ms`)
    })

    test(`deleting a token through A ends the tokens it made through B, on both, within ${REVOCATION_BOUND_MS / 1000} s`, async (t) => {
      const created = await runCli([
        ...['tokens', 'create', '--account', 'lineage-both', '--database', database.url],
        ...['--scope', 'plants:read', '--scope', 'tokens:manage'],
      ])
      assert.equal(created.code, 0, created.stderr)
      const root = created.stdout.split('\n')[0]!
      const make = async (server: ServerProcess, secret: string) => {
        const res = await http(server.baseUrl, 'POST', '/tokens', {
          token: secret,
          body: { scopes: ['plants:read', 'tokens:manage'] },
        })
        assert.equal(res.status, 201, res.text)
        return JSON.parse(res.text) as { id: string; secret: string }
      }
      const m = await make(a, root)
      const c = await make(b, m.secret)
      // Used on both just before deleting its maker, so both hold it in their cache as valid.
      for (const server of [a, b]) {
        const res = await http(server.baseUrl, 'GET', '/plants', { token: c.secret })
        assert.equal(res.status, 200, res.text)
      }

      const deleted = await http(a.baseUrl, 'DELETE', `/tokens/${m.id}`, { token: root })
      assert.equal(deleted.status, 204, deleted.text)
      const deletedBy = Date.now()

      let answers: HttpResult[] = []
      await eventually(
        async () => {
          answers = await Promise.all(
            [a, b].map((server) => http(server.baseUrl, 'GET', '/plants', { token: c.secret })),
          )
          return answers.every((res) => res.status !== 200)
        },
        REVOCATION_BOUND_MS + SLACK_MS,
        100,
      )
      for (const res of answers) {
        assert.equal(res.status, 401, res.text)
        assert.equal(errorCode(res), 40102)
      }
      const elapsed = Date.now() - deletedBy
      t.diagnostic(`the token its maker made refused by both ${elapsed} ms after DELETE answered`)
      assert.ok(elapsed < REVOCATION_BOUND_MS + SLACK_MS, `refused by both only after ${elapsed} ms`)
    })

    test('200 concurrent POSTs of 50 ids spread over both servers all answer 200 and store exactly 50 plants', async () => {
      const ids = Array.from({ length: 200 }, (_, i) => 1000 + (i % 50))
      // Alternate A and B per request, shifted every 50, so each id goes twice to each server.
      const results = await Promise.all(
        ids.map((id, i) =>
          http([a, b][(i + Math.floor(i / 50)) % 2]!.baseUrl, 'POST', '/plants', {
            token: seeded,
            body: { id, name: `Plant ${id}`, tag: 'same' },
          }),
        ),
      )
      const statuses = results.map((res) => res.status)
      assert.deepEqual(
        statuses.filter((status) => status !== 200),
        [],
        `statuses: ${statuses.join(' ')}`,
      )
      results.forEach((res, i) => assert.deepEqual(JSON.parse(res.text), { name: `Plant ${ids[i]}`, tag: 'same' }))

      const expected = Array.from({ length: 50 }, (_, k) => ({ id: 1000 + k, name: `Plant ${1000 + k}` }))
      assert.deepEqual(await listed(a, 'same'), expected)
      assert.deepEqual(await listed(b, 'same'), expected)
    })

    test('200 concurrent POSTs of 50 ids with a different name each, over both servers, let one per id win', async () => {
      const requests = Array.from({ length: 200 }, (_, i) => ({ id: 2000 + (i % 50), name: `Racer ${i}`, tag: 'race' }))
      const results = await Promise.all(
        requests.map((body, i) =>
          http([a, b][(i + Math.floor(i / 50)) % 2]!.baseUrl, 'POST', '/plants', { token: seeded, body }),
        ),
      )
      const statuses = results.map((res) => res.status)
      const summary = `statuses: ${statuses.join(' ')}`
      assert.equal(statuses.filter((status) => status === 200).length, 50, summary)
      assert.equal(statuses.filter((status) => status === 409).length, 150, summary)
      for (const res of results.filter((res) => res.status === 409)) assert.equal(errorCode(res), 40901)

      // Exactly one winner per id, and it is the name stored.
      const winners = new Map<number, string>()
      requests.forEach((body, i) => {
        if (results[i]!.status !== 200) return
        assert.ok(!winners.has(body.id), `two 200s for id ${body.id}`)
        winners.set(body.id, body.name)
      })
      const expected = [...winners].sort(([x], [y]) => x - y).map(([id, name]) => ({ id, name }))
      assert.equal(expected.length, 50)
      assert.deepEqual(await listed(a, 'race'), expected)
      assert.deepEqual(await listed(b, 'race'), expected)
    })

    test('creates and deletes racing on the same ids over both servers end as some serial order explains', async () => {
      const { secret } = await cliToken(database.url, 'racer')
      const pick = <T>(options: T[]): T => options[Math.floor(Math.random() * options.length)]!
      const perId = Array.from({ length: 20 }, () =>
        Array.from({ length: 8 }, () =>
          pick([{ kind: 'create', name: 'a' }, { kind: 'create', name: 'b' }, { kind: 'delete' }] as const),
        ),
      )
      let sent = 0
      const send = async (id: number, op: (typeof perId)[number][number]): Promise<RacedOp> => {
        const server = [a, b][sent++ % 2]!
        const res =
          op.kind === 'create'
            ? await http(server.baseUrl, 'POST', '/plants', { token: secret, body: { id, name: op.name } })
            : await http(server.baseUrl, 'DELETE', `/plants/${id}`, { token: secret })
        return { ...op, status: res.status }
      }
      const seen = await Promise.all(perId.map((ops, id) => Promise.all(ops.map((op) => send(id, op)))))
      const res = await http(b.baseUrl, 'GET', '/plants?fields=id,name&limit=1000', { token: secret })
      const stored = new Map((JSON.parse(res.text) as Array<{ id: number; name: string }>).map((p) => [p.id, p.name]))
      seen.forEach((ops, id) => {
        const final = stored.get(id) ?? null
        assert.ok(serialOrder(ops, null, final), `id ${id}: ${JSON.stringify(ops)} ending in ${final}`)
      })
    })

    // Last, so that both first starts have long finished. A lost race shows as a second token, or, since the
    // seeded secret is unique in the store, as the loser's error on its stderr. Whether the two starts
    // overlap closely enough is up to timing; test/storage/migrations.test.ts races the storage directly.
    test('the two concurrent first starts created exactly one bootstrap token, and both servers still run', async () => {
      const result = await runCli(['tokens', 'list', '--account', 'default', '--database', database.url])
      assert.equal(result.code, 0, result.stderr)
      const rows = result.stdout.trimEnd().split('\n').slice(1)
      assert.equal(rows.length, 1, result.stdout)
      assert.match(rows[0]!, /^tok_[0-9a-f]{16}\s+default\s+plants:read,plants:write\s+active\s.*bootstrap/)
      for (const server of [a, b]) {
        // A start that lost the race would print its error here and exit.
        assert.equal(server.stderr, '')
        assert.equal(server.process.exitCode, null)
        assert.equal(server.process.signalCode, null)
        assert.equal((await http(server.baseUrl, 'GET', '/plants', { token: seeded })).status, 200)
      }
    })
  })
}
