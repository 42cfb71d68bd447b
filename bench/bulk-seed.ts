/**
 * Seeds a database before its service starts, as an operator would set one up: schema and tokens through the
 * service's own CLI, then the plants with SQL (millions through the API would take longer than the benchmark).
 * The rows are those the API would store: bench/plants.ts decides every plant.
 */
import { queryRows, withPostgres, withSqlite } from './databases.js'
import { run } from './machine.js'
import { CATALOGUE, seedPlant } from './plants.js'
import { REPO_DIR, SERVICE_MAIN } from './servers.js'

/** Runs the service's CLI and returns its stdout; a failure carries its stderr. */
async function cli(...args: string[]): Promise<string> {
  const failed = (err: Error & { stderr?: string }) => {
    throw new Error(`plantstore ${args.slice(0, 2).join(' ')} failed: ${err.stderr?.trim() || err.message}`)
  }
  return (await run(process.execPath, [SERVICE_MAIN, ...args], { cwd: REPO_DIR }).catch(failed)).stdout
}

/**
 * Inserts the plants with ids in `range` into an existing account, before the service starts or while it is idle.
 * On PostgreSQL the account's plant count is raised by as many: the service keeps plant_counts in its own
 * statements there (on SQLite, triggers do), and its quota reads them.
 */
export async function insertPlants(databaseUrl: string, account: string, range: { start: number; end: number }) {
  if (databaseUrl.startsWith('sqlite:')) {
    return withSqlite(databaseUrl, (db) => {
      const row = db.prepare('SELECT id FROM accounts WHERE name = ?').get(account) as { id: number } | undefined
      if (row === undefined) throw new Error(`SQLite: no account ${account}`)
      const insert = db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?)')
      db.transaction(() => {
        for (let id = range.start; id < range.end; id++) {
          const plant = seedPlant(id)
          insert.run(row.id, id, plant.name, plant.tag ?? null)
        }
      })()
    })
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

/**
 * `plantstore migrate`, `plantstore tokens create` per account (it prints the secret alone on its first line), then
 * the plants 1..n of each; on PostgreSQL then VACUUM (ANALYZE), what autovacuum would soon do, so the runs see the
 * table in its steady state. `databaseUrl`: sqlite:FILE or a postgres:// URL with its search_path.
 */
export async function bulkSeed(databaseUrl: string, accounts: Array<{ name: string; plants: number }>) {
  await cli('migrate', '--database', databaseUrl)
  const seeded = []
  for (const { name, plants } of accounts) {
    const created = await cli('tokens', 'create', '--account', name, '--label', 'bench', '--database', databaseUrl)
    const token = created.split('\n')[0]?.trim()
    if (!token) throw new Error(`tokens create --account ${name} printed no token`)
    await insertPlants(databaseUrl, name, { start: 1, end: plants + 1 })
    seeded.push({ name, plants, token })
  }
  if (!databaseUrl.startsWith('sqlite:'))
    await withPostgres(databaseUrl, async (sql) => void (await sql`VACUUM (ANALYZE) plants`))
  return seeded
}
