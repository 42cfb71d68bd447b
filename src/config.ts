import { isIP } from 'node:net'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { RATE_PATTERN } from './limits/rate.js'
import { redactUrl } from './redact.js'
import type { StorageLimits } from './storage/types.js'

export const DEFAULT_DATABASE_URL = 'sqlite:./data/plantstore.db'

/** How long a client may take: to send the request head, the whole request, and between requests on a connection. */
export interface HttpTimeouts {
  headersMs: number
  requestMs: number
  keepAliveMs: number
}

/** Keep-alive above the 60 s idle timeout common in load balancers, so the balancer closes first. */
export const HTTP_TIMEOUT_DEFAULTS: HttpTimeouts = { headersMs: 10_000, requestMs: 30_000, keepAliveMs: 72_000 }

/**
 * Open connections one process takes, in all and from one client address (the TCP peer, unless a trusted proxy), and
 * how long a connection's answers may wait unread, not moving at all, before it is closed.
 */
export interface ConnectionLimits {
  max: number
  perAddress: number
  writeStallMs: number
}

/**
 * Server-wide 10,000: far more than one process serves at once, well under the open-file limit Node raises at start,
 * and about 40 MB of socket state if every one sits idle (measured: 5,000 idle took 20 MB). Per address 256: a NAT of
 * dozens of browsers (6 each), or a backend whose HTTP client opens a connection per concurrent request (Node's fetch
 * does), fits; one address cannot take the server-wide budget. A connection that reads nothing holds one unsent
 * answer, a page (300 KB for 1,000 plants of 300 characters; at most about 2 MB, if every character is one JSON
 * escapes), so one address holds at most 256 of them, and only until the stall timeout. Stall 30 s, as long as a client has to send its request: a client taking its answer
 * at 32 KB/s or more completes each write within it (the kernel takes much of it at once); one that reads nothing is
 * closed.
 */
export const CONNECTION_LIMIT_DEFAULTS: ConnectionLimits = { max: 10_000, perAddress: 256, writeStallMs: 30_000 }

const milliseconds = (fallback: number) => Type.Integer({ minimum: 100, maximum: 3_600_000, default: fallback })

/** Every setting the service reads, with its environment variable and bounds. The README's table mirrors it. */
export const ConfigSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
  HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  WORKERS: Type.Integer({ minimum: 1, maximum: 256, default: 1 }),
  DATABASE_URL: Type.String({ pattern: '^(sqlite:.+|postgres(ql)?://.+)', default: DEFAULT_DATABASE_URL }),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  DATABASE_MIGRATE_ON_START: Type.Boolean({ default: true }),
  HTTP_HEADERS_TIMEOUT_MS: milliseconds(HTTP_TIMEOUT_DEFAULTS.headersMs),
  HTTP_REQUEST_TIMEOUT_MS: milliseconds(HTTP_TIMEOUT_DEFAULTS.requestMs),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: milliseconds(HTTP_TIMEOUT_DEFAULTS.keepAliveMs),
  HTTP_MAX_CONNECTIONS: Type.Integer({ minimum: 1, maximum: 1_000_000, default: CONNECTION_LIMIT_DEFAULTS.max }),
  HTTP_MAX_CONNECTIONS_PER_ADDRESS: Type.Integer({
    minimum: 1,
    maximum: 1_000_000,
    default: CONNECTION_LIMIT_DEFAULTS.perAddress,
  }),
  HTTP_WRITE_STALL_TIMEOUT_MS: milliseconds(CONNECTION_LIMIT_DEFAULTS.writeStallMs),
  SHUTDOWN_DRAIN_SECONDS: Type.Integer({ minimum: 0, maximum: 3600, default: 0 }),
  SHUTDOWN_GRACE_SECONDS: Type.Integer({ minimum: 0, maximum: 3600, default: 10 }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  PLANTSTORE_RATE_LIMIT: Type.String({ pattern: RATE_PATTERN, default: '600/min' }),
  PLANTSTORE_AUTH_FAILURE_LIMIT: Type.String({ pattern: RATE_PATTERN, default: '20/min' }),
  TRUST_PROXY: Type.String({ pattern: '^(true|false|[0-9]{1,2}|[0-9a-fA-F:.,/ ]+)$', default: 'false' }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://.+' })),
  PLANTSTORE_METRICS_TOKEN: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9\\-._~+/]{16,512}$' })),
  PLANTSTORE_BOOTSTRAP_TOKEN: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9\\-._~+/]{32,512}$' })),
  PLANTSTORE_WEBHOOK_DELIVERY: Type.Boolean({ default: true }),
  PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: Type.Boolean({ default: false }),
  PLANTSTORE_WEBHOOK_TIMEOUT_MS: milliseconds(10_000),
  PLANTSTORE_WEBHOOK_RETRY_BASE_MS: milliseconds(5_000),
  PLANTSTORE_WEBHOOK_GIVE_UP_HOURS: Type.Integer({ minimum: 1, maximum: 720, default: 24 }),
  PLANTSTORE_WEBHOOK_FAILED_RETENTION_HOURS: Type.Integer({ minimum: 1, maximum: 8760, default: 168 }),
  PLANTSTORE_WEBHOOK_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1024, default: 16 }),
  PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1024, default: 4 }),
  PLANTSTORE_WEBHOOK_MAX_QUEUED: Type.Integer({ minimum: 1, maximum: 10_000_000, default: 10_000 }),
  PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: Type.Integer({ minimum: 1, maximum: 10_000, default: 10 }),
  PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: Type.Integer({ minimum: 0, maximum: 999_999_999, default: 1_000_000 }),
})
export type Config = Static<typeof ConfigSchema>

const HINTS: Record<string, string> = {
  PORT: 'an integer from 0 to 65535',
  HOST: 'a host name or address to listen on',
  WORKERS: 'an integer from 1 to 256',
  DATABASE_URL: 'a URL like sqlite:./data/plantstore.db or postgres://user:password@host:5432/database',
  DATABASE_POOL_SIZE: 'an integer from 1 to 1000',
  DATABASE_MIGRATE_ON_START: 'true or false',
  HTTP_HEADERS_TIMEOUT_MS: 'an integer from 100 to 3600000 (milliseconds), at most HTTP_REQUEST_TIMEOUT_MS',
  HTTP_REQUEST_TIMEOUT_MS: 'an integer from 100 to 3600000 (milliseconds)',
  HTTP_KEEP_ALIVE_TIMEOUT_MS: 'an integer from 100 to 3600000 (milliseconds)',
  HTTP_MAX_CONNECTIONS: 'an integer from 1 to 1000000 (open connections per process)',
  HTTP_MAX_CONNECTIONS_PER_ADDRESS: 'an integer from 1 to 1000000 (open connections per client address)',
  HTTP_WRITE_STALL_TIMEOUT_MS: 'an integer from 100 to 3600000 (milliseconds)',
  SHUTDOWN_DRAIN_SECONDS: 'an integer from 0 to 3600 (seconds)',
  SHUTDOWN_GRACE_SECONDS: 'an integer from 0 to 3600 (seconds)',
  LOG_LEVEL: 'one of fatal, error, warn, info, debug, trace, silent',
  PLANTSTORE_RATE_LIMIT: 'requests per token like 600/min, 10/s or 5000/h, or 0 for no limit',
  PLANTSTORE_AUTH_FAILURE_LIMIT: 'failed authentications per client address like 20/min, or 0 for no limit',
  TRUST_PROXY: 'false, true, a hop count, or comma-separated proxy addresses/CIDRs',
  REDIS_URL: 'a URL like redis://host:6379 or rediss://user:password@host:6380',
  PLANTSTORE_METRICS_TOKEN: '16 to 512 characters from A-Z a-z 0-9 - . _ ~ + /',
  PLANTSTORE_BOOTSTRAP_TOKEN: '32 to 512 characters from A-Z a-z 0-9 - . _ ~ + /',
  PLANTSTORE_WEBHOOK_DELIVERY: 'true or false',
  PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true or false',
  PLANTSTORE_WEBHOOK_TIMEOUT_MS: 'an integer from 100 to 3600000 (milliseconds)',
  PLANTSTORE_WEBHOOK_RETRY_BASE_MS: 'an integer from 100 to 3600000 (milliseconds)',
  PLANTSTORE_WEBHOOK_GIVE_UP_HOURS: 'an integer from 1 to 720 (hours)',
  PLANTSTORE_WEBHOOK_FAILED_RETENTION_HOURS: 'an integer from 1 to 8760 (hours)',
  PLANTSTORE_WEBHOOK_CONCURRENCY: 'an integer from 1 to 1024 (attempts in flight per process)',
  PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: 'an integer from 1 to 1024 (attempts in flight per account)',
  PLANTSTORE_WEBHOOK_MAX_QUEUED: 'an integer from 1 to 10000000 (deliveries queued per subscription)',
  PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: 'an integer from 1 to 10000 (webhook subscriptions per account)',
  PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: 'an integer from 0 to 999999999 (plants per account; 0 for no limit)',
}

/** The per-account quotas the storage enforces, from the configuration. */
export function storageLimits(config: Config): StorageLimits {
  return {
    plantsPerAccount: config.PLANTSTORE_MAX_PLANTS_PER_ACCOUNT,
    subscriptionsPerAccount: config.PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT,
    queuedPerSubscription: config.PLANTSTORE_WEBHOOK_MAX_QUEUED,
  }
}

const SECRET_KEYS = new Set(['PLANTSTORE_BOOTSTRAP_TOKEN', 'PLANTSTORE_METRICS_TOKEN'])

/** Turns the text of an integer or boolean setting into its value; anything else is left for validation to name. */
function fromText(schema: TSchema, value: unknown): unknown {
  if (typeof value !== 'string') return value
  if (schema.type === 'integer' && /^[0-9]{1,9}$/.test(value)) return Number(value)
  if (schema.type === 'boolean' && (value === 'true' || value === 'false')) return value === 'true'
  return value
}

/** Fastify's trustProxy from the TRUST_PROXY setting: whose X-Forwarded-For gives the client address. */
export function trustProxy(setting: string): boolean | number | string {
  if (setting === 'true' || setting === 'false') return setting === 'true'
  return /^[0-9]+$/.test(setting) ? Number(setting) : setting
}

/** A TRUST_PROXY list entry: an IP address, optionally with a prefix length that fits it. */
function proxyEntryValid(entry: string): boolean {
  const [address = '', prefix, extra] = entry.trim().split('/')
  const version = isIP(address)
  if (version === 0 || extra !== undefined) return false
  return prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128))
}

/** Rules across keys, after each key is valid on its own. */
function checked(config: Config): Config {
  const trust = trustProxy(config.TRUST_PROXY)
  if (typeof trust === 'string' && !trust.split(',').every(proxyEntryValid)) {
    throw new ConfigError(`TRUST_PROXY: invalid value ${JSON.stringify(trust)}; expected ${HINTS.TRUST_PROXY}`)
  }
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `HTTP_HEADERS_TIMEOUT_MS: ${config.HTTP_HEADERS_TIMEOUT_MS} is above HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS})`,
    )
  }
  return config
}

/** Invalid configuration; the message starts with the key's name. */
export class ConfigError extends Error {}

/**
 * Reads configuration once: command-line overrides win over the environment,
 * which wins over defaults. Throws ConfigError naming the first bad key.
 */
export function loadConfig(env: NodeJS.ProcessEnv, overrides: Partial<Record<keyof Config, string>> = {}): Config {
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(ConfigSchema.properties)) {
    const value = overrides[key as keyof Config] ?? env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  for (const [key, value] of Object.entries(raw))
    raw[key] = fromText(ConfigSchema.properties[key as keyof Config], value)
  const config = Value.Default(ConfigSchema, raw)
  const error = Value.Errors(ConfigSchema, config).First()
  if (error === undefined) return checked(config as Config)
  const key = error.path.split('/')[1] ?? 'configuration'
  const shown = SECRET_KEYS.has(key) ? '(hidden)' : JSON.stringify(redactUrl(String(raw[key])))
  throw new ConfigError(`${key}: invalid value ${shown}; expected ${HINTS[key] ?? error.message}`)
}
