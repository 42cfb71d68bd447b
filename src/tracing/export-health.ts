import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base'

type LogFn = (fields: object, message: string) => void

/** Where the exports' failures are told. */
export interface ExportLog {
  warn: LogFn
  info: LogFn
}

const reasonOf = (err: unknown) => (err instanceof Error ? err.message : String(err))

/**
 * The exporter's answers, watched. The SDK hands a failed export to its error handler, which logs nothing unless a
 * diagnostic logger is set: a collector away would go unnoticed. This says so once when exports start failing and
 * once when they succeed again, never once per export (a collector away for an hour fails one every few seconds).
 * It also counts the spans of exports not answered yet and of failed ones, for the line a stop writes.
 */
export class ExportHealth {
  #failing = false
  #failedExports = 0
  /** Spans of failed exports, ever. */
  #lost = 0
  /** Spans handed to the exporter and not answered yet. */
  #inFlight = 0
  /** Once the stop's flush runs, its own line says what went wrong. */
  #stopping = false
  #log: ExportLog | undefined

  logTo(log: ExportLog): void {
    this.#log = log
  }

  /** The exporter to hand the processor: each answer is told here before the processor sees it. */
  exporter(inner: SpanExporter): SpanExporter {
    return {
      export: (spans: ReadableSpan[], done: (result: ExportResult) => void) => {
        this.#inFlight += spans.length
        inner.export(spans, (result) => {
          this.#inFlight -= spans.length
          this.#answered(spans.length, result)
          done(result)
        })
      },
      shutdown: () => inner.shutdown(),
      forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
    }
  }

  #answered(spans: number, result: ExportResult): void {
    if (result.code === ExportResultCode.SUCCESS) {
      if (!this.#failing) return
      this.#failing = false
      if (!this.#stopping) this.#log?.info({ failedExports: this.#failedExports }, 'trace export working again')
      this.#failedExports = 0
      return
    }
    this.#lost += spans
    this.#failedExports++
    if (this.#failing) return
    this.#failing = true
    if (!this.#stopping) {
      const message = 'trace export failing: spans are dropped until the collector takes them again'
      this.#log?.warn({ err: reasonOf(result.error) }, message)
    }
  }

  /**
   * Runs the stop's last flush for `ms` at most, and never fails: a collector that hangs or refuses costs the spans
   * still buffered (`waiting` counts those not handed to the exporter yet), said in one line, not the stop's time or
   * its exit code.
   */
  async flushWithin(ms: number, flush: () => Promise<void>, waiting: () => number): Promise<void> {
    this.#stopping = true
    const lostBefore = this.#lost
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(resolve, ms, `not sent within ${ms} ms`)
    })
    const outcome = await Promise.race([flush().then(() => undefined, reasonOf), late])
    clearTimeout(timer)
    if (outcome === undefined) return
    const droppedSpans = this.#lost - lostBefore + this.#inFlight + waiting()
    this.#log?.warn({ droppedSpans, err: outcome }, `tracing: ${droppedSpans} spans dropped at stop`)
  }
}
