import { BackupUnsupportedError, type BackupSummary } from '../types.js'

/**
 * PostgreSQL is not copied by this command: its own tools do it better than a client could (pg_dump for a logical
 * copy, base backups with WAL archiving for point-in-time recovery), and managed services do it for you.
 */
export async function backup(): Promise<BackupSummary> {
  throw new BackupUnsupportedError(
    "PostgreSQL stores are backed up with PostgreSQL's own tools: pg_dump, or base backups with WAL archiving (see docs/operations.md#backups)",
  )
}
