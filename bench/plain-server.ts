/**
 * The plain handler: the least a server of the plant store's contract must do, as a user would write it by hand
 * with Fastify 5 on better-sqlite3 or postgres.js (bench/README.md), on the service's schema but none of its code.
 * The harness compiles it alone and runs `node plain-server.mjs PORT` with PLANTSTORE_BENCH_DATABASE (sqlite:FILE
 * or a postgres:// URL), PLANTSTORE_BENCH_ACCOUNT and PLANTSTORE_BENCH_TOKEN (the account's).
 */
import { timingSafeEqual } from 'node:crypto'
import Database from 'better-sqlite3'
import Fastify from 'fastify'
import postgres from 'postgres'

type Row = { id: bigint | string; name: string; tag: string | null }

/** The account's rows: a page in id order after `after`, inserted (false: the id is taken), removed. */
function sqliteStore(file: string, account: string) {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  const { id: accountId } = db.prepare('SELECT id FROM accounts WHERE name = ?').get(account) as { id: number }
  // LIMIT written into the SQL: a bound one makes SQLite re-plan the statement on every run.
  const pages = new Map<string, Database.Statement>()
  const pageStatement = (after: boolean, limit: number) => {
    const key = `${after}:${limit}`
    let statement = pages.get(key)
    if (statement === undefined) {
      const where = after ? 'account_id = ? AND id > ?' : 'account_id = ?'
      statement = db.prepare(`SELECT id, name, tag FROM plants WHERE ${where} ORDER BY id LIMIT ${limit}`)
      pages.set(key, statement.safeIntegers(true))
    }
    return statement
  }
  const insert = db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
  const remove = db.prepare('DELETE FROM plants WHERE account_id = ? AND id = ?')
  return {
    page: (after: string | undefined, limit: number) =>
      (after === undefined
        ? pageStatement(false, limit).all(accountId)
        : pageStatement(true, limit).all(accountId, BigInt(after))) as Row[],
    insert: (id: number, name: string, tag: string | null) => insert.run(accountId, id, name, tag).changes === 1,
    remove: (id: number) => remove.run(accountId, id).changes === 1,
    close: () => db.close(),
  }
}

async function postgresStore(url: string, account: string) {
  // The service's pool size, one query per connection, as the service (bench/README.md); missing from its types.
  const sql = postgres(url, { max: Number(process.env.DATABASE_POOL_SIZE) || 10, ...{ max_pipeline: 1 } })
  const [row] = await sql<Array<{ id: string }>>`SELECT id FROM accounts WHERE name = ${account}`
  const accountId = row?.id
  if (accountId === undefined) throw new Error(`no account ${account}`)
  return {
    page: (after: string | undefined, limit: number) =>
      after === undefined
        ? sql<Row[]>`SELECT id, name, tag FROM plants WHERE account_id = ${accountId} ORDER BY id LIMIT ${limit}`
        : sql<Row[]>`SELECT id, name, tag FROM plants WHERE account_id = ${accountId} AND id > ${after}
            ORDER BY id LIMIT ${limit}`,
    insert: async (id: number, name: string, tag: string | null) =>
      (
        await sql`INSERT INTO plants (account_id, id, name, tag) VALUES (${accountId}, ${id}, ${name}, ${tag})
        ON CONFLICT DO NOTHING`
      ).count === 1,
    remove: async (id: number) =>
      (await sql`DELETE FROM plants WHERE account_id = ${accountId} AND id = ${id}`).count === 1,
    close: () => sql.end(),
  }
}

// The service's cursor format, so the harness's page checks and cursors hold for both: base64url of "p1:<id>".
const encodeCursor = (id: bigint | string) => Buffer.from(`p1:${id}`).toString('base64url')
const decodeCursor = (cursor: string) => /^p1:(-?[0-9]{1,19})$/.exec(Buffer.from(cursor, 'base64url').toString())?.[1]

const name = { type: 'string', minLength: 1, maxLength: 200 }
const tag = { type: 'string', minLength: 1, maxLength: 100 }
const plant = { type: 'object', properties: { name, tag }, required: ['name'], additionalProperties: false }
const error = (code: number, message: string) => ({ error: code, message })

const databaseUrl = process.env.PLANTSTORE_BENCH_DATABASE ?? ''
const account = process.env.PLANTSTORE_BENCH_ACCOUNT ?? ''
const store = databaseUrl.startsWith('sqlite:')
  ? sqliteStore(databaseUrl.slice('sqlite:'.length), account)
  : await postgresStore(databaseUrl, account)
const expected = Buffer.from(`Bearer ${process.env.PLANTSTORE_BENCH_TOKEN ?? ''}`)

const app = Fastify()
app.addHook('onRequest', (request, reply, done) => {
  const given = Buffer.from(request.headers.authorization ?? '')
  if (given.length === expected.length && timingSafeEqual(given, expected)) return done()
  reply.code(401).send(error(40101, 'a valid bearer token is required'))
})
app.addHook('onClose', async () => void (await store.close()))

app.get<{ Querystring: { limit: number; cursor?: string } }>(
  '/plants',
  {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
          cursor: { type: 'string', maxLength: 64 },
        },
      },
      response: { 200: { type: 'array', items: plant } },
    },
  },
  async (request, reply) => {
    const { limit, cursor } = request.query
    const after = cursor === undefined ? undefined : decodeCursor(cursor)
    if (cursor !== undefined && after === undefined) return reply.code(400).send(error(40001, 'not a cursor'))
    // One row more than asked: whether it comes back says whether there is a next page.
    const rows = await store.page(after, limit + 1)
    const items = rows.slice(0, limit)
    const last = items.at(-1)
    if (rows.length > limit && last !== undefined) {
      reply.header('link', `</plants?limit=${limit}&cursor=${encodeCursor(last.id)}>; rel="next"`)
    }
    return items.map((row) => (row.tag === null ? { name: row.name } : { name: row.name, tag: row.tag }))
  },
)

app.post<{ Body: { id: number; name: string; tag?: string } }>(
  '/plants',
  {
    schema: {
      body: { type: 'object', properties: { id: { type: 'integer' }, name, tag }, required: ['id', 'name'] },
      response: { 200: plant },
    },
  },
  async (request, reply) => {
    const { id, name, tag } = request.body
    if (!(await store.insert(id, name, tag ?? null))) return reply.code(409).send(error(40901, 'id taken'))
    return { name, tag }
  },
)

app.delete<{ Params: { id: number } }>(
  '/plants/:id',
  { schema: { params: { type: 'object', properties: { id: { type: 'integer' } } } } },
  async (request, reply) => {
    if (!(await store.remove(request.params.id))) return reply.code(404).send(error(40401, 'no such plant'))
    return reply.code(204).send()
  },
)

await app.listen({ port: Number(process.argv[2]), host: '127.0.0.1' })
process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)))
