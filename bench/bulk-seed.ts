/**
 * Seeds a service's database before the service starts, fast and the way an operator would set one up: the
 * schema and the accounts' tokens through the service's own CLI (dist/cli/main.js migrate and tokens create), then
 * the plants with SQL in one statement or transaction per account (seeding millions through the API would take
 * longer than the benchmark). The rows are those the API would store (bench/plants.ts decides every plant); the
 * harness checks pages the service then serves against the expected bytes.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import Database from 'better-sqlite3'
import postgres from 'postgres'
import type { IdRange } from './id-pool.js'
import { CATALOGUE, seedPlant } from './plants.js'
import { REPO_DIR } from './servers.js'

const run = promisify(execFile)

/** An account to create and fill with plants 1..plants. */
export interface AccountPlan {
  /** Account name, given to `tokens create --account`. */
  name: string
  plants: number
}

/** A seeded account: its token (from the CLI) and how long its plants took to insert. */
export interface SeededAccount extends AccountPlan {
  token: string
  insertSeconds: number
}

const MAIN = path.join(REPO_DIR, 'dist', 'cli', 'main.js')

/** Runs the service's CLI (`main`, dist/cli/main.js) and returns its stdout; a failure carries its stderr. */
async function cli(args: string[], main = MAIN): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, [main, ...args], { cwd: REPO_DIR, encoding: 'utf8' })
    return stdout
  } catch (err) {
    const { stderr, message } = err as { stderr?: string; message: string }
    throw new Error(`plantstore ${args.slice(0, 2).join(' ')} failed: ${stderr?.trim() || message}`)
  }
}

/** `tokens create` prints the secret alone on stdout's first line (details go to stderr). */
async function createToken(databaseUrl: string, account: string, main: string): Promise<string> {
  const args = ['tokens', 'create', '--account', account, '--label', 'bench', '--database', databaseUrl]
  const stdout = await cli(args, main)
  const secret = stdout.split('\n')[0]?.trim() ?? ''
  if (secret === '') throw new Error(`tokens create --account ${account} printed no token`)
  return secret
}

/** Plants with ids in `range` through one prepared insert in one transaction. */
function insertSqlite(file: string, account: string, range: IdRange): void {
  const db = new Database(file, { timeout: 10_000 })
  try {
    const row = db.prepare('SELECT id FROM accounts WHERE name = ?').get(account) as { id: number } | undefined
    if (row === undefined) throw new Error(`SQLite: no account ${account} after tokens create`)
    const insert = db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?)')
    db.transaction(() => {
      for (let id = range.start; id < range.end; id++) {
        const plant = seedPlant(id)
        insert.run(row.id, id, plant.name, plant.tag ?? null)
      }
    })()
  } finally {
    db.close()
  }
}

/**
 * Plants with ids in `range` in one INSERT ... SELECT FROM generate_series, the catalogue passed as two arrays
 * indexed the way seedPlant() picks its entry (id % length). The account's plant count goes up by as many in the
 * same transaction: on PostgreSQL the service keeps plant_counts in its own statements, not by trigger (migration
 * 4), so plants inserted behind its back would be invisible to the per-account quota.
 */
async function insertPostgres(databaseUrl: string, account: string, range: IdRange): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const [row] = await sql<Array<{ id: string }>>`SELECT id::text FROM accounts WHERE name = ${account}`
    if (row === undefined) throw new Error(`PostgreSQL: no account ${account} after tokens create`)
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
  } finally {
    await sql.end()
  }
}

/**
 * After the bulk insert, what autovacuum would soon do on its own: statistics for the planner and the visibility
 * map, so the measured runs see the table in its steady state rather than the first reads setting hint bits.
 */
async function vacuumPostgres(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    await sql`VACUUM (ANALYZE) plants`
  } finally {
    await sql.end()
  }
}

/**
 * Inserts the plants with ids in `range` into an existing account, with SQL: before the service starts, or between
 * runs while it is idle (the delete scenario's top-ups).
 */
export async function insertPlants(databaseUrl: string, account: string, range: IdRange): Promise<void> {
  if (databaseUrl.startsWith('sqlite:')) insertSqlite(databaseUrl.slice('sqlite:'.length), account, range)
  else await insertPostgres(databaseUrl, account, range)
}

/** The plants an account holds, read straight from the database. */
export async function countPlants(databaseUrl: string, account: string): Promise<number> {
  const query = 'SELECT count(*) AS n FROM plants p JOIN accounts a ON a.id = p.account_id WHERE a.name = $1'
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true })
    try {
      return Number(db.prepare(query.replace('$1', '?')).pluck().get(account))
    } finally {
      db.close()
    }
  }
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const [row] = await sql.unsafe<Array<{ n: string }>>(query, [account])
    return Number(row?.n)
  } finally {
    await sql.end()
  }
}

// Per account: the plants it holds and the count the per-account quota reads (the sum of its stripes).
const COUNTS_SQL = `SELECT a.name, (SELECT count(*) FROM plants p WHERE p.account_id = a.id) AS plants,
  (SELECT coalesce(sum(c.plants), 0) FROM plant_counts c WHERE c.account_id = a.id) AS counted FROM accounts a`

/**
 * Throws unless every account's plant count (plant_counts, migration 4) equals the plants it holds: seeding
 * behind the service's back must leave the quota seeing what the service itself would have counted.
 */
export async function checkPlantCounts(databaseUrl: string): Promise<void> {
  let rows: Array<{ name: string; plants: number | string; counted: number | string }>
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true })
    try {
      rows = db.prepare(COUNTS_SQL).all() as typeof rows
    } finally {
      db.close()
    }
  } else {
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
    try {
      rows = await sql.unsafe(COUNTS_SQL)
    } finally {
      await sql.end()
    }
  }
  const wrong = rows.filter((row) => String(row.plants) !== String(row.counted))
  if (wrong.length > 0) {
    const list = wrong.map((row) => `${row.name} holds ${row.plants} plants, counted ${row.counted}`).join('; ')
    throw new Error(`plant counts disagree with the plants seeded: ${list}`)
  }
}

/**
 * Migrates the database with `plantstore migrate`, creates each account's token with `plantstore tokens
 * create` (of `main`: another checkout's build migrates its own database), then inserts its plants. `databaseUrl`
 * is the service's: sqlite:FILE or a postgres:// URL (with its search_path).
 */
export async function bulkSeed(databaseUrl: string, accounts: AccountPlan[], main = MAIN): Promise<SeededAccount[]> {
  await cli(['migrate', '--database', databaseUrl], main)
  // Side by side: each is a process start or so of waiting, and the store serialises their writes itself.
  const tokens = await Promise.all(accounts.map((account) => createToken(databaseUrl, account.name, main)))
  const seeded: SeededAccount[] = []
  for (const [index, account] of accounts.entries()) {
    const started = performance.now()
    await insertPlants(databaseUrl, account.name, { start: 1, end: account.plants + 1 })
    seeded.push({ ...account, token: tokens[index] ?? '', insertSeconds: (performance.now() - started) / 1000 })
  }
  if (!databaseUrl.startsWith('sqlite:')) await vacuumPostgres(databaseUrl)
  await checkPlantCounts(databaseUrl)
  return seeded
}
