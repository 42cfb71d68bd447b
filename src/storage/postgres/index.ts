import { migrateOrCheck } from '../schema.js'
import { DELIVERY_POOL_SIZE, NO_LIMITS, type OpenOptions, type Storage } from '../types.js'
import { connect, endPool } from './client.js'
import { PostgresHealth } from './health.js'
import { hostRotation, onEachHost } from './hosts.js'
import { PostgresIdempotency } from './idempotency.js'
import { migrate, pendingMigrations } from './migrations.js'
import { PostgresPlants } from './plants.js'
import { PostgresTokens } from './tokens.js'
import { PostgresWebhooks } from './webhooks.js'

/**
 * Opens storage on PostgreSQL (or an engine speaking its protocol) through two pools of the `postgres` client, one
 * for requests and one for webhook delivery, migrating it or checking that it is current as `options.migrate` says.
 */
export async function open(url: string, options: OpenOptions): Promise<Storage> {
  const sql = connect(url, options.poolSize ?? 10)
  const delivery = connect(url, DELIVERY_POOL_SIZE, { application_name: 'plantstore-delivery' })
  const endPools = async () => {
    await Promise.all([endPool(sql), endPool(delivery)])
  }
  let migrationsApplied: number[]
  try {
    migrationsApplied = await onEachHost(hostRotation(url), () =>
      migrateOrCheck(options.migrate, { apply: () => migrate(sql), pending: () => pendingMigrations(sql) }),
    )
  } catch (err) {
    await endPools()
    throw err
  }
  const limits = options.limits ?? NO_LIMITS
  return {
    plants: new PostgresPlants(sql, limits),
    tokens: new PostgresTokens(sql, url),
    webhooks: new PostgresWebhooks(sql, delivery, limits),
    idempotency: new PostgresIdempotency(sql, limits),
    health: new PostgresHealth(sql),
    migrationsApplied,
    // Requests have finished when storage closes (the app closes first), so a connection that does not say
    // goodbye within a second is dropped: one that died in an outage otherwise holds shutdown for long.
    close: endPools,
  }
}
