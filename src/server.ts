import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { buildApp, closeAll } from './app.js'
import { parseRate } from './limits/rate.js'
import type { Redis } from 'ioredis'
import { connectRedis } from './limits/redis.js'
import { bootstrapToken, BOOTSTRAP_ACCOUNT } from './auth/bootstrap.js'
import { DEFAULT_SCOPES } from './auth/tokens.js'
import {
  ConfigError,
  connectionLimits,
  corsOrigins,
  deliverySettings,
  httpTimeouts,
  idempotencyKeyTtlMs,
  jwtSettings,
  pageBudgetLimits,
  trustProxy,
  type Config,
} from './config.js'
import { openConfiguredStorage } from './configured-storage.js'
import { kernelBacklogCap, shortBacklogWarning } from './socket/listen-backlog.js'
import { sqliteFile } from './storage/index.js'
import type { Lifecycle } from './plugins/lifecycle.js'
import { tracingEnabled } from './tracing/enabled.js'

function bootstrapBanner(secret: string, url: string): string {
  return [
    '',
    `plantstore: this store had no API tokens, so one was created for account "${BOOTSTRAP_ACCOUNT}"`,
    `with scopes ${DEFAULT_SCOPES.join(' and ')}. It is shown only this once; keep it somewhere safe:`,
    '',
    `    ${secret}`,
    '',
    `Try it:  curl -H "Authorization: Bearer ${secret}" ${url}/plants`,
    '',
  ].join('\n')
}

/**
 * Shows the token the first start created, once: as a banner to a person at a terminal, else as one JSON log line
 * with the token in it (a plain-text banner among JSON lines breaks log shippers), whatever LOG_LEVEL says, since it
 * is shown nowhere else.
 */
function showFirstToken(log: FastifyBaseLogger, secret: string, url: string): void {
  if (process.stdout.isTTY === true) return void process.stdout.write(bootstrapBanner(secret, url) + '\n')
  log
    .child({}, { level: 'info' })
    .info(
      { account: BOOTSTRAP_ACCOUNT, scopes: DEFAULT_SCOPES, token: secret },
      'this store had no API tokens, so one was created; it is shown only this once',
    )
}

function listenError(err: unknown, config: Config): Error {
  const code = (err as { code?: unknown }).code
  if (code === 'EADDRINUSE') return new ConfigError(`PORT: ${config.PORT} is already in use on ${config.HOST}`)
  if (code === 'EACCES') return new ConfigError(`PORT: not allowed to listen on port ${config.PORT}`)
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return new ConfigError(`HOST: cannot listen on ${config.HOST}`)
  return err instanceof Error ? err : new Error(String(err))
}

/** The Redis connection as a resource the app closes: politely, else at once (a reconnecting client would stay). */
function closing(redis: Redis): { close(): Promise<void> } {
  return {
    close: () =>
      redis.quit().then(
        () => undefined,
        () => redis.disconnect(),
      ),
  }
}

/** Starts the service: storage, first token, app, listen; SIGTERM/SIGINT close it cleanly. */
export async function serve(config: Config): Promise<void> {
  // Its code loads only when an endpoint is set: without one, no OpenTelemetry module is read.
  const tracing = tracingEnabled()
    ? (await import('./tracing/index.js')).startTracing(
        sqliteFile(config.DATABASE_URL) ? 'sqlite' : 'postgresql',
        config.SHUTDOWN_TRACE_FLUSH_MS,
      )
    : undefined
  const storage = await openConfiguredStorage(config)
  const shared = config.REDIS_URL === undefined ? undefined : await connectRedis(config.REDIS_URL)
  // From here the app owns both: whatever ends the process, app.close() closes them, after the requests.
  const flush = tracing && { close: () => tracing.shutdown() }
  // Spans last: those of the closing requests and storage calls go out with them.
  const owned = [storage, ...(shared ? [closing(shared.redis)] : []), ...(flush ? [flush] : [])]
  const lifecycle = { draining: false }
  const origins = corsOrigins(config)
  const app = await buildApp({
    storage,
    owned,
    lifecycle,
    metricsToken: config.PLANTSTORE_METRICS_TOKEN,
    jwt: jwtSettings(config),
    tokensPerAccount: config.PLANTSTORE_MAX_TOKENS_PER_ACCOUNT,
    idempotency: { ttlMs: idempotencyKeyTtlMs(config) },
    trustProxy: trustProxy(config.TRUST_PROXY),
    cors: origins && { origins },
    tracing,
    rateLimit: {
      perToken: parseRate(config.PLANTSTORE_RATE_LIMIT),
      perAccount: parseRate(config.PLANTSTORE_ACCOUNT_RATE_LIMIT),
      authFailures: parseRate(config.PLANTSTORE_AUTH_FAILURE_LIMIT),
      ...(shared && { redis: shared.redis }),
    },
    logger: { level: config.LOG_LEVEL, pretty: process.stdout.isTTY === true },
    timeouts: httpTimeouts(config),
    connections: connectionLimits(config),
    pageBudget: pageBudgetLimits(config),
    webhooks: {
      allowPrivate: config.PLANTSTORE_WEBHOOK_ALLOW_PRIVATE,
      delivery: config.PLANTSTORE_WEBHOOK_DELIVERY ? deliverySettings(config) : undefined,
    },
  }).catch(async (err: unknown) => {
    await closeAll(owned).catch(() => {})
    throw err
  })
  shared?.logTo(app.log)
  tracing?.logTo(app.log)
  let address: string
  try {
    address = await app.listen({ port: config.PORT, host: config.HOST, backlog: config.HTTP_LISTEN_BACKLOG })
  } catch (err) {
    // Not half-started: whatever closing meets, the listen error is the one to report.
    await app.close().catch((closeErr: unknown) => app.log.error({ err: closeErr }, 'closing after a failed start'))
    throw listenError(err, config)
  }
  const short = shortBacklogWarning(config.HTTP_LISTEN_BACKLOG, kernelBacklogCap())
  if (short) app.log.warn(short.fields, short.message)
  if (tracing) app.log.info(tracing.summary, 'tracing on: spans exported over OTLP')
  try {
    // Only once listening: a first start that fails must not use up the token it would have shown.
    const generated = await bootstrapToken(storage, config.PLANTSTORE_BOOTSTRAP_TOKEN)
    if (generated !== undefined) showFirstToken(app.log, generated, address)
  } catch (err) {
    // A server without its first token would keep the process alive and serving.
    await app.close().catch((closeErr: unknown) => app.log.error({ err: closeErr }, 'closing after a failed start'))
    throw err
  }
  stopOnSignals(app, lifecycle, config)
}

/**
 * On SIGTERM or SIGINT: drain, stop accepting, let requests in flight finish within the grace period, close the rest,
 * exit 0 (1 if closing failed or outlasted its deadline).
 */
function stopOnSignals(app: FastifyInstance, lifecycle: Lifecycle, config: Config): void {
  let stopping = false
  const shutdown = async (signal: string): Promise<void> => {
    // A repeated signal (Ctrl-C reaches every process of the group; npm forwards it too) must not cut requests.
    if (stopping) return void app.log.info({ signal }, 'already shutting down')
    stopping = true
    app.log.info({ signal, drainSeconds: config.SHUTDOWN_DRAIN_SECONDS }, 'shutting down')
    // Whatever happens below, the process ends a little after the grace period and the spans' flush.
    const deadline =
      (config.SHUTDOWN_DRAIN_SECONDS + config.SHUTDOWN_GRACE_SECONDS + 5) * 1000 + config.SHUTDOWN_TRACE_FLUSH_MS
    setTimeout(() => process.exit(1), deadline).unref()
    lifecycle.draining = true
    await sleep(config.SHUTDOWN_DRAIN_SECONDS * 1000)
    // Stop accepting; requests in flight finish, bounded by the grace period, then connections are cut.
    const grace = setTimeout(() => {
      app.log.warn('grace period over: closing the connections still open')
      app.server.closeAllConnections()
    }, config.SHUTDOWN_GRACE_SECONDS * 1000)
    // The grace period is the requests' alone: once the last connection has ended, no connection is left to cut, and
    // what app.close() still closes (storage, the shared store, the spans' flush: bounded by its own setting) has the
    // deadline above.
    app.server.once('close', () => clearTimeout(grace))
    try {
      await app.close()
      app.log.info('stopped')
      process.exit(0)
    } catch (err) {
      app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    } finally {
      clearTimeout(grace)
    }
  }
  process.on('SIGTERM', (signal) => void shutdown(signal))
  process.on('SIGINT', (signal) => void shutdown(signal))
}
