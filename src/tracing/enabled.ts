/**
 * Whether traces are exported: only when an OTLP endpoint is set, by the standard OpenTelemetry variables. Kept apart
 * from the tracing code, which loads only then.
 */
export function tracingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT)
}

/**
 * The OpenTelemetry variables tracing reads (the SDK and its exporters read them; the service only chooses the
 * exporter by the protocol), for docs/configuration.md.
 */
export const OTEL_VARIABLES: ReadonlyArray<{ name: string; meaning: string }> = [
  {
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    meaning: "The collector's base URL (`/v1/traces` is added); tracing is off without it or the next",
  },
  { name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', meaning: 'The full URL traces are sent to, over the one above' },
  {
    name: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    meaning: '`http/protobuf` (the default) or `http/json`; another value stops the start',
  },
  { name: 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', meaning: 'The same, for traces only, over the one above' },
  {
    name: 'OTEL_EXPORTER_OTLP_HEADERS',
    meaning: 'Headers sent to the collector, `key=value,…` (an API key, say); never logged',
  },
  { name: 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', meaning: 'The same, for traces only' },
  {
    name: 'OTEL_EXPORTER_OTLP_TIMEOUT',
    meaning: 'Milliseconds one export may take, its retries included (10000); then its spans are dropped',
  },
  { name: 'OTEL_SERVICE_NAME', meaning: '`service.name` of every span (`plantstore` when unset)' },
  {
    name: 'OTEL_RESOURCE_ATTRIBUTES',
    meaning: 'More resource attributes, `key=value,…` (`deployment.environment.name=prod`)',
  },
  {
    name: 'OTEL_TRACES_SAMPLER',
    meaning: 'The sampler: `parentbased_always_on` (the default), `parentbased_traceidratio`, …',
  },
  { name: 'OTEL_TRACES_SAMPLER_ARG', meaning: 'Its argument: `0.01` samples 1% of the traces that start here' },
  { name: 'OTEL_BSP_SCHEDULE_DELAY', meaning: 'Milliseconds between exports of the buffered spans (5000)' },
  {
    name: 'OTEL_BSP_MAX_QUEUE_SIZE',
    meaning:
      'Spans buffered at most (2048); past it they are dropped and counted (`plantstore_trace_spans_dropped_total`)',
  },
  { name: 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', meaning: 'Spans per export (512)' },
]
