import { FastifyOtelInstrumentation } from '@fastify/otel'
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base'
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node'
import type { FastifyPluginCallback, FastifyRequest } from 'fastify'
import { ConfigError } from '../config.js'
import { redactUrl } from '../redact.js'
import type { ClaimedDelivery, StorageTimer } from '../storage/index.js'
import type { DispatcherOptions } from '../webhooks/dispatcher.js'
import { DroppedSpans } from './dropped-spans.js'
import { ExportHealth, type ExportLog } from './export-health.js'

/**
 * What the app takes of tracing: the request spans' plugin, a span per storage call, the ids a request's log lines
 * carry, and the final flush.
 */
export interface Tracing {
  plugin: FastifyPluginCallback
  storageTimer: StorageTimer
  logFields(request: FastifyRequest): { trace_id: string; span_id: string } | undefined
  /** The W3C `traceparent` of the active span, for the events a change writes; undefined outside one. */
  traceparent(): string | undefined
  traceAttempt: NonNullable<DispatcherOptions['traceAttempt']>
  /** Spans dropped so far because the export queue was full (a slow or unreachable collector). */
  droppedSpans(): number
  /** Where failing exports, and the spans a stop drops, are told; nowhere until given. */
  logTo(log: ExportLog): void
  /** Sends the spans still buffered, for the flush bound at most; never rejects. */
  shutdown(): Promise<void>
  /** Where and how the spans go, for the line a start writes. */
  summary: TracingSummary
}

/**
 * The traces URL (its password hidden), the protocol, the service's name and the sampler as set: a misspelt
 * variable shows in the start's line as a default, where nothing else would show it.
 */
export interface TracingSummary {
  endpoint: string
  protocol: string
  serviceName: string
  sampler: string
  samplerArg?: string
}

/** The `traceparent` (and `tracestate`) of `ctx`, as headers. */
function headersOf(ctx = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {}
  propagation.inject(ctx, carrier)
  return carrier
}

/** The request span's ids, for its log lines; none for a request the plugin did not trace. */
function logFields(request: FastifyRequest) {
  const { span } = request.opentelemetry()
  if (span === null) return undefined
  const { traceId, spanId } = span.spanContext()
  return { trace_id: traceId, span_id: spanId }
}

/** The exporter OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL names: http/protobuf (the default) or http/json. */
function exporter(protocol: string): SpanExporter {
  if (protocol === 'http/json') return new JsonExporter()
  if (protocol === 'http/protobuf') return new ProtobufExporter()
  throw new ConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL: ${JSON.stringify(protocol)} is not http/protobuf or http/json`)
}

/** The request span's own attributes: the path without its query (a tag filter is plant text), the request id. */
function describeRequest(span: Span, request: FastifyRequest): void {
  // A span the sampler left out records nothing: what it would be told is not worth working out.
  if (!span.isRecording()) return
  const route = request.routeOptions.url
  if (route !== undefined) span.updateName(`${request.method} ${route}`)
  span.setAttribute('url.path', request.url.split('?')[0] ?? '/')
  span.setAttribute('plantstore.request_id', request.id)
}

/**
 * Starts exporting traces as the standard variables say (endpoint, protocol, headers, service name, resource
 * attributes, sampler, batch sizes: each read by the SDK itself), with the W3C trace context propagated in and out.
 * `flushMs` bounds the stop's last flush.
 */
export function startTracing(
  backend: 'sqlite' | 'postgresql',
  flushMs: number,
  env: NodeJS.ProcessEnv = process.env,
): Tracing {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'plantstore' }))
    .merge(detectResources({ detectors: [envDetector] }))
  // The queue OTEL_BSP_MAX_QUEUE_SIZE bounds (2048 by default): a collector that cannot keep up loses spans, never
  // memory or a request's time.
  const queue = new DroppedSpans(Number(env.OTEL_BSP_MAX_QUEUE_SIZE) || 2048)
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf'
  const health = new ExportHealth()
  const batches = new BatchSpanProcessor(queue.exporter(health.exporter(exporter(protocol))))
  const provider = new NodeTracerProvider({ resource, spanProcessors: [queue.processor(batches)] })
  provider.register()
  const instrumentation = new FastifyOtelInstrumentation({
    requestHook: describeRequest,
    recordExceptions: false,
    // One span per request: a span per hook, or for the handler within it, would cost more than most of them do.
    instrumentHooks: false,
    instrumentHandler: false,
  })
  instrumentation.setTracerProvider(provider)
  const tracer = provider.getTracer('plantstore')
  // Told after the call, in the caller's context: the span is made with the call's start and ended at once.
  const storageTimer: StorageTimer = (operation, seconds, failed) => {
    if (trace.getSpan(context.active()) === undefined) return
    const startTime = performance.timeOrigin + performance.now() - seconds * 1000
    const attributes = { 'db.system.name': backend, 'db.operation.name': operation }
    const span = tracer.startSpan(operation, { kind: SpanKind.CLIENT, startTime, attributes })
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR })
    span.end()
  }
  // A CLIENT span per attempt, the child of the change that wrote the event (however long ago, on whatever instance);
  // the receiver gets its traceparent. The URL is not recorded: its path or query may hold the receiver's secret.
  const traceAttempt: Tracing['traceAttempt'] = async (delivery: ClaimedDelivery, attempt) => {
    const parent =
      delivery.traceparent === null
        ? ROOT_CONTEXT
        : propagation.extract(ROOT_CONTEXT, { traceparent: delivery.traceparent })
    const span = tracer.startSpan(
      `webhook ${delivery.eventType}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'http.request.method': 'POST',
          // A store from before every way in checked URLs may hold one that does not parse: the attempt then fails
          // in send(), recorded with why, in this span.
          ...(URL.canParse(delivery.url) && { 'server.address': new URL(delivery.url).hostname }),
          'plantstore.webhook.event_id': delivery.eventId,
          'plantstore.webhook.subscription_id': delivery.subscriptionId,
          'plantstore.webhook.attempt': delivery.attempts + 1,
        },
      },
      parent,
    )
    try {
      const result = await attempt(headersOf(trace.setSpan(parent, span)))
      if (result.status !== null) span.setAttribute('http.response.status_code', result.status)
      if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR })
      return result
    } finally {
      span.end()
    }
  }
  const traceparent = () => headersOf().traceparent
  return {
    plugin: instrumentation.plugin(),
    storageTimer,
    logFields,
    traceparent,
    traceAttempt,
    droppedSpans: () => queue.dropped,
    logTo: (log) => health.logTo(log),
    shutdown: () =>
      health.flushWithin(
        flushMs,
        () => provider.shutdown(),
        () => queue.waiting,
      ),
    summary: {
      // As the exporter makes it: the traces endpoint as given, else `v1/traces` under the base one.
      endpoint: redactUrl(
        env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
          `${(env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '').replace(/\/*$/, '')}/v1/traces`,
      ),
      protocol,
      serviceName: String(resource.attributes['service.name']),
      sampler: env.OTEL_TRACES_SAMPLER || 'parentbased_always_on',
      ...(env.OTEL_TRACES_SAMPLER_ARG && { samplerArg: env.OTEL_TRACES_SAMPLER_ARG }),
    },
  }
}
