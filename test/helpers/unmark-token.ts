import Database from 'better-sqlite3'
import postgres from 'postgres'
import { sqliteFile } from '../../src/storage/index.js'

/**
 * Clears the revocation of token `id` in the database at `url`, as when a token is made while the revocation of its
 * maker runs on another connection, so that the cascade does not see it (PostgreSQL, read committed): only its
 * lineage still ends it.
 */
export async function unmarkToken(url: string, id: string): Promise<void> {
  const file = sqliteFile(url)
  if (file !== undefined) {
    const db = new Database(file)
    db.prepare('UPDATE tokens SET revoked_at = NULL WHERE id = ?').run(id)
    db.close()
    return
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    await sql`UPDATE tokens SET revoked_at = NULL WHERE id = ${id}`
  } finally {
    await sql.end()
  }
}
