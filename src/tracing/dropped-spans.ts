import type { Context } from '@opentelemetry/api'
import type { ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base'

/**
 * A batch processor's queue, counted from outside: spans ended and sampled come in, batches handed to the exporter go
 * out. The SDK's BatchSpanProcessor drops a span that finds its queue full and only logs how many; this counts them
 * for /metrics. It mirrors the processor's rule (full at `maxQueueSize` spans waiting), in front of it.
 */
export class DroppedSpans {
  dropped = 0
  #waiting = 0

  constructor(readonly maxQueueSize: number) {}

  /** Spans in the queue, not yet handed to the exporter. */
  get waiting(): number {
    return this.#waiting
  }

  /** The processor to hand the provider: counts each span, then passes it on. */
  processor(inner: SpanProcessor): SpanProcessor {
    return {
      onStart: (span: Span, parent: Context) => inner.onStart(span, parent),
      onEnd: (span: ReadableSpan) => {
        if ((span.spanContext().traceFlags & 1) === 1) {
          if (this.#waiting >= this.maxQueueSize) this.dropped++
          else this.#waiting++
        }
        inner.onEnd(span)
      },
      forceFlush: () => inner.forceFlush(),
      shutdown: () => inner.shutdown(),
    }
  }

  /** The exporter to hand the processor: each batch leaves the queue as it is handed over. */
  exporter(inner: SpanExporter): SpanExporter {
    return {
      export: (spans: ReadableSpan[], done: (result: ExportResult) => void) => {
        this.#waiting = Math.max(0, this.#waiting - spans.length)
        inner.export(spans, done)
      },
      shutdown: () => inner.shutdown(),
      forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
    }
  }
}
