import type { AuthThrottle, RateLimitKind } from '../limits/rate-limits.js'
import { timingSafeEqual, createHash } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { FastifyRequest } from 'fastify'
import type { AuthFailure } from '../auth/bearer.js'
import type { ConnectionCap } from '../socket/connection-limits.js'
import type { PageBudgetBound } from './page-budget.js'
import { ApiError } from '../errors.js'
import type { DeliveryOutcome, StorageTimer } from '../storage/index.js'

/** The service's Prometheus metrics, in a registry of its own (one per app, so tests never share counts). */
export class Metrics {
  readonly registry = new Registry()
  readonly #requests = new Counter({
    name: 'plantstore_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    registers: [this.registry],
  })
  readonly #duration = new Histogram({
    name: 'plantstore_http_request_duration_seconds',
    help: 'Time from request arrival to response, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  })
  readonly #authFailures = new Counter({
    name: 'plantstore_auth_failures_total',
    help: 'Requests refused by bearer authentication (API or /metrics), by reason',
    labelNames: ['reason'],
    registers: [this.registry],
  })
  readonly #rateLimited = new Counter({
    name: 'plantstore_rate_limited_total',
    help: 'Requests refused with 429, by limit: token, account or auth_failures',
    labelNames: ['limit'],
    registers: [this.registry],
  })
  readonly #connectionsRefused = new Counter({
    name: 'plantstore_http_connections_refused_total',
    help: 'Connections refused on arrival, by limit: address (HTTP_MAX_CONNECTIONS_PER_ADDRESS) or server (HTTP_MAX_CONNECTIONS)',
    labelNames: ['limit'],
    registers: [this.registry],
  })
  readonly #writeStalls = new Counter({
    name: 'plantstore_http_write_stalls_total',
    help: 'Connections closed because their answers sat unread for HTTP_WRITE_STALL_TIMEOUT_MS',
    registers: [this.registry],
  })
  readonly #pagesRefused = new Counter({
    name: 'plantstore_page_budget_refused_total',
    help: 'GET /plants pages refused, by bound: rows of pages in progress of the account (429, PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT) or of the process (503, PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS), or the account past its share of a busy event loop (share, 429)',
    labelNames: ['bound'],
    registers: [this.registry],
  })
  readonly #storage = new Histogram({
    name: 'plantstore_storage_call_duration_seconds',
    help: 'Storage call latency, by operation and outcome',
    labelNames: ['operation', 'outcome'],
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  })

  readonly #webhookDeliveries = new Counter({
    name: 'plantstore_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by outcome: delivered, retry (will be tried again), deferred (cut short for another account, tried again) or failed (given up)',
    labelNames: ['outcome'],
    registers: [this.registry],
  })
  readonly #webhookDuration = new Histogram({
    name: 'plantstore_webhook_delivery_duration_seconds',
    help: 'Time of one webhook delivery attempt, from sending to the answer, the error or the timeout',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  })

  readonly #webhookLatency = new Histogram({
    name: 'plantstore_webhook_delivery_latency_seconds',
    help: 'Time from a plant change to the delivery of its event (retries included)',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600, 86400],
    registers: [this.registry],
  })

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'plantstore_' })
  }

  /** Counts one webhook attempt and its duration; a delivered one also gives its event's age (the latency). */
  readonly webhookAttempt = (outcome: DeliveryOutcome['state'], seconds: number, ageSeconds: number): void => {
    this.#webhookDeliveries.inc({ outcome })
    this.#webhookDuration.observe(seconds)
    if (outcome === 'delivered') this.#webhookLatency.observe(ageSeconds)
  }

  /** Reports the webhook queue depth at each scrape, as `depth` tells it. */
  webhookQueue(depth: () => Promise<number>): void {
    new Gauge({
      name: 'plantstore_webhook_queue_depth',
      help: 'Webhook deliveries not yet made (all instances: read from the database at scrape time)',
      registers: [this.registry],
      async collect() {
        this.set(await depth().catch(() => Number.NaN))
      },
    })
  }

  /** Reports the open HTTP connections at each scrape, as `open` tells it. */
  connections(open: () => number): void {
    new Gauge({
      name: 'plantstore_http_connections',
      help: 'HTTP connections open in this process (admitted by the connection limits)',
      registers: [this.registry],
      collect() {
        this.set(open())
      },
    })
  }

  /** Reports the spans tracing dropped, as `dropped` counts them (only while tracing is on). */
  droppedSpans(dropped: () => number): void {
    new Counter({
      name: 'plantstore_trace_spans_dropped_total',
      help: 'Spans dropped because the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE): a slow or unreachable collector',
      registers: [this.registry],
      collect() {
        this.reset()
        this.inc(dropped())
      },
    })
  }

  /** Reports the rows of pages in progress at each scrape, as `rows` tells it. */
  pagesInProgress(rows: () => number): void {
    new Gauge({
      name: 'plantstore_page_rows_in_progress',
      help: 'Rows of GET /plants pages (each counted as its limit) being made or written in this process',
      registers: [this.registry],
      collect() {
        this.set(rows())
      },
    })
  }

  /** Reports the rows of pages set aside while their answers wait for clients that do not read them. */
  pagesUnread(rows: () => number): void {
    new Gauge({
      name: 'plantstore_page_rows_unread',
      help: 'Of plantstore_page_rows_in_progress, the rows of pages whose answers have waited for their clients past 250 ms, set aside from PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS',
      registers: [this.registry],
      collect() {
        this.set(rows())
      },
    })
  }

  /** Counts one page refused by the page budget. */
  readonly pageRefused = (bound: PageBudgetBound): void => {
    this.#pagesRefused.inc({ bound })
  }

  /** Counts one connection refused by a cap. */
  readonly connectionRefused = (limit: ConnectionCap): void => {
    this.#connectionsRefused.inc({ limit })
  }

  /** Counts one connection closed by the write stall timeout. */
  readonly writeStalled = (): void => {
    this.#writeStalls.inc()
  }

  /** Counts one answered request. */
  request(route: string, method: string, status: number, seconds: number): void {
    const labels = { route, method, status: String(status) }
    this.#requests.inc(labels)
    this.#duration.observe(labels, seconds)
  }

  /** Counts one refused authentication. */
  authFailure(reason: AuthFailure): void {
    this.#authFailures.inc({ reason })
  }

  /** Counts one request refused by a rate limit. */
  readonly rateLimited = (limit: RateLimitKind): void => {
    this.#rateLimited.inc({ limit })
  }

  /** Times storage calls; give it to the store's observe(). */
  readonly storageTimer: StorageTimer = (operation, seconds, failed) =>
    this.#storage.observe({ operation, outcome: failed ? 'error' : 'ok' }, seconds)
}

const sha256 = (text: string) => createHash('sha256').update(text).digest()

/** Who may scrape: the metrics token when one is set, and the failed-authentication limit it shares with the API. */
export interface MetricsAccess {
  token?: string
  throttle?: AuthThrottle
}

/**
 * A check of the scrape's bearer token against `token` (in constant time, as hashes of equal length). A wrong token
 * is a failed authentication like a wrong API token: counted (reason `metrics`) and, per client address, limited by
 * the same throttle, so the metrics token cannot be guessed faster than an API token.
 */
function metricsGuard(metrics: Metrics, token: string, throttle?: AuthThrottle) {
  const expected = sha256(`Bearer ${token}`)
  const refusal = () =>
    new ApiError('invalidToken', 'GET /metrics needs the PLANTSTORE_METRICS_TOKEN bearer token', {
      'www-authenticate': 'Bearer realm="plantstore-metrics"',
    })
  return async (request: FastifyRequest): Promise<void> => {
    await throttle?.check(request)
    const header = request.headers.authorization
    // Sending no token is not guessing one, as on the API.
    if (header === undefined || header === '') {
      metrics.authFailure('missing')
      throw refusal()
    }
    if (timingSafeEqual(sha256(header), expected)) return
    metrics.authFailure('metrics')
    await throttle?.refused(request)
    throw refusal()
  }
}

/** Counts every response, and serves GET /metrics in the Prometheus text format: open, or behind `access.token`. */
export function registerMetrics(app: FastifyInstance, metrics: Metrics, access: MetricsAccess = {}): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.request(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
  const guard = access.token === undefined ? undefined : metricsGuard(metrics, access.token, access.throttle)
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    await guard?.(request)
    reply.type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })
}
