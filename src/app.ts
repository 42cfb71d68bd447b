import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import pino from 'pino'
import { Authenticator } from './auth/bearer.js'
import { declareCaller } from './auth/caller.js'
import { createJwtAuth, type JwtSettings } from './auth/jwt-auth.js'
import {
  CONNECTION_LIMIT_DEFAULTS,
  HTTP_TIMEOUT_DEFAULTS,
  PAGE_BUDGET_DEFAULTS,
  type ConnectionLimits,
  type HttpTimeouts,
  type PageBudgetLimits,
} from './config.js'
import { TokenVerifier } from './auth/token-cache.js'
import { clientErrorHandler, connectHandler, MAX_HEADER_BYTES } from './socket/client-errors.js'
import { registerConnectionLimits } from './socket/connection-limits.js'
import { frameworkErrors, registerErrorHandler } from './plugins/error-handler.js'
import { BODY_LIMIT, registerJsonBody } from './plugins/json-body.js'
import { registerLifecycle, type Lifecycle } from './plugins/lifecycle.js'
import { stdoutDestination, type LogDestination } from './logging/log-destination.js'
import { redactingLogger } from './logging/log-redaction.js'
import { PageBudget } from './plugins/page-budget.js'
import { registerPipeliningLimit } from './plugins/pipelining.js'
import { admitHead } from './plugins/request-head.js'
import { registerRequestGates, sendRequestId } from './plugins/request-gates.js'
import { registerUnreadBodyClose } from './socket/unread-body.js'
import { requestId } from './socket/request-id.js'
import { Metrics, registerMetrics } from './plugins/metrics.js'
import { AuthThrottle, CallerLimits, type RateLimitOptions } from './limits/rate-limits.js'
import { registerCallerGate } from './plugins/caller-gate.js'
import { RequestLog } from './logging/request-log.js'
import { registerCors, type CorsOptions } from './plugins/cors.js'
import {
  IDEMPOTENCY_DEFAULTS,
  idempotencyHooks,
  registerIdempotencyPurge,
  type IdempotencySettings,
} from './plugins/idempotency.js'
import { registerDocs } from './routes/docs.js'
import { healthRoutes } from './routes/health.js'
import { plantRoutes } from './routes/plants.js'
import { tokenRoutes } from './routes/tokens.js'
import { webhookRoutes } from './routes/webhooks.js'
import { registerWebhookDispatcher, type DeliverySettings } from './plugins/webhook-dispatcher.js'
import { parseQueryString } from './schemas/query-string.js'
import { validatorCompiler } from './schemas/validator.js'
import type { InstrumentedStorage } from './storage/index.js'
import { trustedPeer } from './limits/trusted-peer.js'
import type { Tracing } from './tracing/index.js'
import { TraceFields } from './logging/trace-fields.js'
import { prettyTerminal } from './logging/pretty.js'
import { VERSION } from './version.js'

/** What the app needs from its host: storage, and how to log and cache. */
export interface AppOptions {
  /** The store, as openStorage returns it: the app's metrics observe its calls while the app runs. */
  storage: InstrumentedStorage
  /** How long a verified token is trusted before it is read again; bounds revocation delay. */
  tokenCacheTtlMs?: number
  /** Log level and destination (stdout when not given; human-readable when `pretty`); no logging when absent. */
  logger?: { level: string; stream?: NodeJS.WritableStream; pretty?: boolean }
  /** Server timeouts in milliseconds; the config's defaults when not given. */
  timeouts?: HttpTimeouts
  /** Caps on open connections; the config's defaults when not given. */
  connections?: ConnectionLimits
  /** Traces (tracing/index.ts): a span per request and per storage call; none when absent. */
  tracing?: Pick<Tracing, 'plugin' | 'storageTimer' | 'logFields' | 'traceparent' | 'traceAttempt' | 'droppedSpans'>
  /** Browser origins allowed to call the API (CORS); none when absent. */
  cors?: CorsOptions
  /** Fastify's trustProxy: which proxies' X-Forwarded-For names the client (for per-address limits, logs). */
  trustProxy?: boolean | number | string
  /** Rows of pages one account, and the process, may have in progress at once; the config's defaults when not given. */
  pageBudget?: PageBudgetLimits
  /** Rate limits; none when not given. */
  rateLimit?: RateLimitOptions
  /** JWT access tokens from the operator's identity provider; only the service's own tokens when not given. */
  jwt?: JwtSettings
  /** How long Idempotency-Key answers are kept, claims held, and how often expired keys are purged; 24 h etc. when not given. */
  idempotency?: IdempotencySettings
  /** Tokens not revoked an account may hold for POST /tokens to make another; 100 when not given. */
  tokensPerAccount?: number
  /** When set, GET /metrics needs this bearer token; open otherwise. */
  metricsToken?: string
  /** Shared with the server, which starts draining on a shutdown signal; a private one when not given. */
  lifecycle?: Lifecycle
  /**
   * Webhooks: whether subscriptions may name private addresses (false when not given), and the delivery settings
   * when this app is to deliver (no dispatcher runs otherwise).
   */
  webhooks?: { allowPrivate?: boolean; delivery?: DeliverySettings }
  /**
   * Resources the app owns: closed when it closes, in this order, after everything that uses them (the webhook
   * dispatcher's attempts included). A caller that keeps ownership of its storage leaves it out.
   */
  owned?: ReadonlyArray<{ close(): Promise<void> }>
}

function logger(
  options: AppOptions['logger'],
  stdout: () => pino.DestinationStream,
  traceFields: TraceFields | undefined,
): FastifyBaseLogger | undefined {
  if (options === undefined) return undefined
  const { pretty, stream, ...rest } = options
  const settings = { ...rest, mixin: traceFields?.mixin }
  // For people reading a terminal, pino-pretty in this thread (a worker would load the formatter by path, which the
  // sources run through tsx cannot give it); JSON lines for everything else.
  return redactingLogger(settings, pretty === true ? prettyTerminal() : (stream ?? stdout()))
}

/**
 * Closes every resource in order, each even if one before it failed (a Redis client left open would keep the
 * process alive); rejects with the failures, if any.
 */
export async function closeAll(resources: ReadonlyArray<{ close(): Promise<void> }>): Promise<void> {
  const failures: unknown[] = []
  for (const resource of resources) await resource.close().catch((err: unknown) => failures.push(err))
  if (failures.length === 1) throw failures[0]
  if (failures.length > 1) throw new AggregateError(failures, 'closing the resources the app owns failed')
}

/**
 * Builds the Fastify app with every route and plugin. It never listens: the caller does.
 *
 * The order of registration is the order requests meet them, and it matters:
 * 1. connection caps, on accept, before a byte is read;
 * 2. onRequest, one hook of request gates: request id (every answer carries it), pipelining count (before any gate
 *    that may answer, since its onResponse counts every answer back out), request head checks (before
 *    authentication reads Authorization), draining (503 while shutting down); and onSend, the close of a connection
 *    answered before its request's body arrived (for every answer, the gates' included);
 * 3. the error handler and the JSON body parser, for everything after; CORS (onRequest), when origins are allowed:
 *    a preflight is answered there, before authentication and the rate limits, and the grant set on every answer;
 * 4. the OpenAPI document and /docs; metrics, with the failed-authentication throttle (per client address) shared
 *    with 5;
 * 5. the caller gate (onRequest, for routes that declare a scope): the failed-authentication throttle, bearer
 *    authentication, the per-token then the per-account rate limit, the scope (plugins/caller-gate.ts);
 * 6. the routes (GET /plants holds the page budget from its route-level preHandler, after the pipelining limit's
 *    app-level one has given the request its turn; POST /plants and POST /webhooks claim their Idempotency-Key
 *    there too, and keep the answer in onSend); then the webhook dispatcher, started once listening.
 * onClose hooks run in reverse order of registration: the log's last flush and the owned resources' hook are
 * registered first so that they run last.
 */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const timeouts = options.timeouts ?? HTTP_TIMEOUT_DEFAULTS
  let logs: LogDestination | undefined
  const { tracing } = options
  const traceFields = tracing && new TraceFields(tracing.logFields)
  const app = Fastify({
    http: {
      headersTimeout: timeouts.headersMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      // Node checks the timeouts above only this often (30 s by default), so a slow client would stay longer.
      connectionsCheckingInterval: Math.min(1000, timeouts.headersMs),
      // Node's own refusal of an HTTP/1.1 request without Host has no body; admitHead answers instead.
      requireHostHeader: false,
    },
    requestTimeout: timeouts.requestMs,
    routerOptions: { querystringParser: parseQueryString },
    // Fastify takes all three forms; its overloads only accept one member of the union at a time.
    trustProxy: (options.trustProxy ?? false) as boolean,
    keepAliveTimeout: timeouts.keepAliveMs,
    clientErrorHandler,
    loggerInstance: logger(options.logger, () => (logs = stdoutDestination()).stream, traceFields),
    genReqId: requestId,
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    logController: new RequestLog(),
    // Answered by registerLifecycle instead, in the Error shape.
    return503OnClosing: false,
    frameworkErrors,
  })
  app.server.on('connect', connectHandler(app.log))
  // First of all: it must see every hook and route registered after it. Its onRequest hook, which starts the request's
  // span, runs before this one, which gives the request's log lines the span's ids.
  if (tracing && traceFields) {
    await app.register(tracing.plugin)
    app.addHook('onRequest', (request, _reply, done) => {
      traceFields.remember(request)
      done()
    })
  }
  const owned = options.owned ?? []
  // Registered first, so it runs last: every other close hook's lines go out with it.
  const written = logs
  if (written) app.addHook('onClose', () => written.close())
  app.addHook('onClose', () => closeAll(owned))
  app.setValidatorCompiler(validatorCompiler)
  declareCaller(app)
  const metrics = new Metrics()
  // First, while Node's own listener is the server's only 'connection' listener: the caps take it over and call it
  // for admitted sockets alone, so a 'connection' listener added before this would see refused sockets too.
  const openConnections = registerConnectionLimits(app, {
    ...(options.connections ?? CONNECTION_LIMIT_DEFAULTS),
    uncapped: trustedPeer(options.trustProxy),
    onRefused: metrics.connectionRefused,
    onStalled: metrics.writeStalled,
  })
  metrics.connections(openConnections)
  if (tracing) metrics.droppedSpans(tracing.droppedSpans)
  const { storage } = options
  const stopObserving = storage.observe(metrics.storageTimer)
  const stopTracing = tracing && storage.observe(tracing.storageTimer)
  app.addHook('onClose', async () => {
    stopObserving()
    stopTracing?.()
  })
  // In this order, in one onRequest hook: the request id (every answer carries it), the pipelining count (before any
  // gate that may answer, since its onResponse counts every answer back out), the head checks (before
  // authentication reads Authorization), draining.
  registerRequestGates(app, [
    sendRequestId,
    registerPipeliningLimit(app),
    admitHead,
    registerLifecycle(app, options.lifecycle ?? { draining: false }),
  ])
  registerUnreadBodyClose(app)
  registerErrorHandler(app)
  registerJsonBody(app)
  if (options.cors) await registerCors(app, options.cors)
  await registerDocs(app, VERSION)
  const limits = options.rateLimit && { ...options.rateLimit, onLimited: metrics.rateLimited }
  // One failure count per client address for API tokens and the metrics token alike.
  const throttle = limits && AuthThrottle.from(limits)
  registerMetrics(app, metrics, { token: options.metricsToken, throttle })
  const trustedMs = options.tokenCacheTtlMs ?? 2000
  const verifier = new TokenVerifier(storage.tokens, { ttlMs: trustedMs })
  const jwt = options.jwt && createJwtAuth(options.jwt, storage.tokens, app.log)
  const authenticator = new Authenticator(verifier, (reason) => metrics.authFailure(reason), jwt)
  registerCallerGate(app, { authenticator, throttle, limits: limits && new CallerLimits(limits) })
  await app.register(healthRoutes, { health: storage.health })
  const pageBudget = new PageBudget(options.pageBudget ?? PAGE_BUDGET_DEFAULTS)
  metrics.pagesInProgress(() => pageBudget.inProgress())
  metrics.pagesUnread(() => pageBudget.unread())
  const keys = options.idempotency ?? IDEMPOTENCY_DEFAULTS
  const idempotency = idempotencyHooks(storage.idempotency, keys)
  registerIdempotencyPurge(app, storage.idempotency, keys.purgeEveryMs ?? IDEMPOTENCY_DEFAULTS.purgeEveryMs)
  await app.register(plantRoutes, {
    plants: storage.plants,
    pageBudget,
    onPageRefused: metrics.pageRefused,
    idempotency,
    traceparent: tracing?.traceparent,
  })
  await app.register(tokenRoutes, { tokens: storage.tokens, quota: options.tokensPerAccount ?? 100, trustedMs })
  const allowPrivate = options.webhooks?.allowPrivate ?? false
  await app.register(webhookRoutes, { webhooks: storage.webhooks, allowPrivate, idempotency })
  metrics.webhookQueue(() => storage.webhooks.countPendingDeliveries())
  const delivery = options.webhooks?.delivery
  if (delivery) {
    const settings = { ...delivery, allowPrivate, traceAttempt: tracing?.traceAttempt }
    registerWebhookDispatcher(app, storage.webhooks, settings, metrics)
  }
  return app
}
