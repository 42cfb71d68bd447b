import type { FastifyBaseLogger, FastifyRequest } from 'fastify'

/** A request's trace ids for its log lines, or none (a request the tracing plugin did not trace). */
export type TraceFieldsOf = (request: FastifyRequest) => { trace_id: string; span_id: string } | undefined

/**
 * Joins a request's log lines to its trace: the logger's mixin adds `trace_id` and `span_id` to each line written
 * through a request's logger. A child logger per request carrying them cost a third of a traced GET's throughput
 * (bench/README.md, "Tracing"); a lookup when a line is written costs nothing for the lines never written.
 */
export class TraceFields {
  readonly #fields = new WeakMap<object, { trace_id: string; span_id: string }>()

  constructor(private readonly fieldsOf: TraceFieldsOf) {}

  /**
   * From the request's onRequest hook on, its logger's lines carry its trace's ids. Read now: the plugin lets go of
   * the span when the answer is sent, before the line that says so is written.
   */
  remember(request: FastifyRequest): void {
    const fields = this.fieldsOf(request)
    if (fields !== undefined) this.#fields.set(request.log, fields)
  }

  /** pino's `mixin`: called with the logger the line is written through; a fresh object, which pino merges into. */
  readonly mixin = (_line: object, _level: number, logger: FastifyBaseLogger | object): object => {
    const fields = this.#fields.get(logger)
    return fields === undefined ? {} : { ...fields }
  }
}
