import postgres from 'postgres'

export interface BenchSchema {
  /** The URL to give the service: the base URL with search_path set to the fresh schema. */
  databaseUrl: string
  name: string
  drop(): Promise<void>
}

/**
 * Creates a fresh schema for this run, so the service starts on an empty store (and makes its bootstrap token)
 * without touching anything else in the database; drop() removes it with everything the run stored. `suffix`
 * tells apart the schemas of one run (the backlog scenarios' twins).
 */
export async function createBenchSchema(baseUrl: string, suffix?: string): Promise<BenchSchema> {
  const name = `plantstore_bench_${process.pid}${suffix === undefined ? '' : `_${suffix}`}`
  const sql = postgres(baseUrl, { max: 1, onnotice: () => {} })
  try {
    await sql`drop schema if exists ${sql(name)} cascade`
    await sql`create schema ${sql(name)}`
  } finally {
    await sql.end()
  }
  const url = new URL(baseUrl)
  url.searchParams.set('search_path', name)
  return {
    databaseUrl: url.toString(),
    name,
    drop: async () => {
      const admin = postgres(baseUrl, { max: 1, onnotice: () => {} })
      try {
        await admin`drop schema if exists ${admin(name)} cascade`
      } finally {
        await admin.end()
      }
    },
  }
}

/** The server's version line, for the report. */
export async function postgresVersion(baseUrl: string): Promise<string> {
  const sql = postgres(baseUrl, { max: 1, onnotice: () => {} })
  try {
    const [row] = await sql<Array<{ version: string }>>`select version()`
    return row?.version.split(' on ')[0] ?? 'unknown'
  } finally {
    await sql.end()
  }
}
