import { MigrationsPendingError } from './types.js'

/**
 * What opening does with the schema, the same on both backends: apply pending migrations and return their versions,
 * or refuse a database that lacks some (MigrationsPendingError), so a role without DDL rights can start.
 */
export async function migrateOrCheck(
  migrate: boolean,
  schema: { apply(): number[] | Promise<number[]>; pending(): number[] | Promise<number[]> },
): Promise<number[]> {
  if (migrate) return schema.apply()
  const pending = await schema.pending()
  if (pending.length > 0) throw new MigrationsPendingError(pending)
  return []
}
