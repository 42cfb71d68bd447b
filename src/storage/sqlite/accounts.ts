import type { Database } from 'better-sqlite3'

/** The id of the account called `name`, created when new; call inside a write transaction. */
export function ensureAccount(db: Database, name: string): number {
  db.prepare('INSERT INTO accounts (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING').run(
    name,
    Date.now(),
  )
  return (db.prepare('SELECT id FROM accounts WHERE name = ?').get(name) as { id: number }).id
}
