/**
 * Seeds a database before its service starts, as an operator would set one up: schema and tokens through the
 * service's own CLI, then the plants with SQL (millions through the API would take longer than the benchmark).
 * The rows are those the API would store: bench/plants.ts decides every plant.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { queryRows, withPostgres, withSqlite } from './databases.js'
import type { IdRange } from './id-pool.js'
import { CATALOGUE, seedPlant } from './plants.js'
import { REPO_DIR } from './servers.js'

const run = promisify(execFile)
const MAIN = path.join(REPO_DIR, 'dist', 'cli', 'main.js')

/** An account to create and fill with plants 1..plants; seeded, with its token and the insert's seconds. */
export interface AccountPlan {
  name: string
  plants: number
}
export interface SeededAccount extends AccountPlan {
  token: string
  insertSeconds: number
}

/** Runs the service's CLI (`main`, a dist/cli/main.js) and returns its stdout; a failure carries its stderr. */
async function cli(args: string[], main: string): Promise<string> {
  try {
    return (await run(process.execPath, [main, ...args], { cwd: REPO_DIR, encoding: 'utf8' })).stdout
  } catch (err) {
    const { stderr, message } = err as { stderr?: string; message: string }
    throw new Error(`plantstore ${args.slice(0, 2).join(' ')} failed: ${stderr?.trim() || message}`)
  }
}

/** `tokens create` prints the secret alone on stdout's first line. */
async function createToken(databaseUrl: string, account: string, main: string): Promise<string> {
  const args = ['tokens', 'create', '--account', account, '--label', 'bench', '--database', databaseUrl]
  const secret = (await cli(args, main)).split('\n')[0]?.trim() ?? ''
  if (secret === '') throw new Error(`tokens create --account ${account} printed no token`)
  return secret
}

/**
 * Inserts the plants with ids in `range` into an existing account with SQL: before the service starts, or between
 * runs while it is idle (the delete scenario's top-ups). SQLite: one prepared insert in one transaction.
 * PostgreSQL: one INSERT … SELECT FROM generate_series, and the account's plant count raised by as many (the
 * service keeps plant_counts in its own statements, not by trigger, and its quota reads them).
 */
export async function insertPlants(databaseUrl: string, account: string, range: IdRange): Promise<void> {
  if (databaseUrl.startsWith('sqlite:')) {
    return withSqlite(
      databaseUrl.slice('sqlite:'.length),
      (db) => {
        const row = db.prepare('SELECT id FROM accounts WHERE name = ?').get(account) as { id: number } | undefined
        if (row === undefined) throw new Error(`SQLite: no account ${account}`)
        const insert = db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?)')
        db.transaction(() => {
          for (let id = range.start; id < range.end; id++) {
            const plant = seedPlant(id)
            insert.run(row.id, id, plant.name, plant.tag ?? null)
          }
        })()
      },
      true,
    )
  }
  await withPostgres(databaseUrl, async (sql) => {
    const [row] = await sql<Array<{ id: string }>>`SELECT id::text FROM accounts WHERE name = ${account}`
    if (row === undefined) throw new Error(`PostgreSQL: no account ${account}`)
    const names = CATALOGUE.map((entry) => entry.name)
    const tags = CATALOGUE.map((entry) => entry.tag ?? null)
    await sql.begin(async (tx) => {
      await tx`INSERT INTO plants (account_id, id, name, tag)
        SELECT ${row.id}::bigint, g, (${names}::text[])[g % ${names.length} + 1], (${tags}::text[])[g % ${names.length} + 1]
        FROM generate_series(${range.start}::bigint, ${range.end - 1}::bigint) AS g`
      // Any stripe will do: the quota reads the sum of the account's stripes.
      await tx`INSERT INTO plant_counts (account_id, stripe, plants) VALUES (${row.id}::bigint, 0, ${range.end - range.start})
        ON CONFLICT (account_id, stripe) DO UPDATE SET plants = plant_counts.plants + excluded.plants`
    })
  })
}

/** The plants an account holds, read straight from the database. */
export async function countPlants(databaseUrl: string, account: string): Promise<number> {
  const query = 'SELECT count(*) AS n FROM plants p JOIN accounts a ON a.id = p.account_id WHERE a.name = $1'
  const [row] = await queryRows<{ n: number | string }>(databaseUrl, query, [account])
  return Number(row?.n)
}

/** Throws unless every account's plant count (the sum of its stripes, which the quota reads) is what it holds. */
export async function checkPlantCounts(databaseUrl: string): Promise<void> {
  const rows = await queryRows<{ name: string; plants: number | string; counted: number | string }>(
    databaseUrl,
    `SELECT a.name, (SELECT count(*) FROM plants p WHERE p.account_id = a.id) AS plants,
      (SELECT coalesce(sum(c.plants), 0) FROM plant_counts c WHERE c.account_id = a.id) AS counted FROM accounts a`,
  )
  const wrong = rows.filter((row) => String(row.plants) !== String(row.counted))
  if (wrong.length > 0) {
    const list = wrong.map((row) => `${row.name} holds ${row.plants} plants, counted ${row.counted}`).join('; ')
    throw new Error(`plant counts disagree with the plants seeded: ${list}`)
  }
}

/**
 * `plantstore migrate`, `plantstore tokens create` per account (of `main`: another checkout's build seeds its own
 * databases), then the plants; on PostgreSQL then VACUUM (ANALYZE), what autovacuum would soon do, so the runs see
 * the table in its steady state. `databaseUrl`: sqlite:FILE or a postgres:// URL with its search_path.
 */
export async function bulkSeed(databaseUrl: string, accounts: AccountPlan[], main = MAIN): Promise<SeededAccount[]> {
  await cli(['migrate', '--database', databaseUrl], main)
  const tokens = await Promise.all(accounts.map((account) => createToken(databaseUrl, account.name, main)))
  const seeded: SeededAccount[] = []
  for (const [index, account] of accounts.entries()) {
    const started = performance.now()
    await insertPlants(databaseUrl, account.name, { start: 1, end: account.plants + 1 })
    seeded.push({ ...account, token: tokens[index] ?? '', insertSeconds: (performance.now() - started) / 1000 })
  }
  if (!databaseUrl.startsWith('sqlite:'))
    await withPostgres(databaseUrl, async (sql) => void (await sql`VACUUM (ANALYZE) plants`))
  await checkPlantCounts(databaseUrl)
  return seeded
}
