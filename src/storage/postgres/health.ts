import type { HealthCheck } from '../types.js'
import type { Sql } from './client.js'
import { guard } from './errors.js'

/** Whether the PostgreSQL server answers, and takes writes. */
export class PostgresHealth implements HealthCheck {
  readonly #sql: Sql

  constructor(sql: Sql) {
    this.#sql = sql
  }

  async ping(): Promise<void> {
    const sql = this.#sql
    await guard(() => sql`SELECT 1`)
  }

  async probeWrite(): Promise<void> {
    const sql = this.#sql
    await guard(
      () => sql`INSERT INTO storage_probe (id, checked_at) VALUES (1, now())
        ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`,
    )
  }
}
