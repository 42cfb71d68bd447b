/**
 * Reads the OTLP/protobuf export requests the service sends, as far as the tests look: the protobuf wire format (a
 * field number and wire type per entry) and, of the OTLP trace messages, the fields below by their numbers in
 * opentelemetry-proto (trace/v1/trace.proto, common/v1/common.proto).
 */
type Field = { number: number; value: bigint | Buffer }

function varint(buffer: Buffer, at: number): [bigint, number] {
  let value = 0n
  for (let shift = 0n; ; shift += 7n) {
    const byte = buffer[at++]!
    value |= BigInt(byte & 0x7f) << shift
    if (byte < 0x80) return [value, at]
  }
}

/** The fields of one message, in order; fixed-width values come back as their bytes. */
function fields(buffer: Buffer): Field[] {
  const out: Field[] = []
  for (let at = 0; at < buffer.length;) {
    const [key, next] = varint(buffer, at)
    const [number, type] = [Number(key >> 3n), Number(key & 7n)]
    if (type === 0) {
      const [value, after] = varint(buffer, next)
      out.push({ number, value })
      at = after
    } else if (type === 2) {
      const [length, start] = varint(buffer, next)
      out.push({ number, value: buffer.subarray(start, start + Number(length)) })
      at = start + Number(length)
    } else {
      const size = type === 1 ? 8 : 4
      out.push({ number, value: buffer.subarray(next, next + size) })
      at = next + size
    }
  }
  return out
}

const all = (message: Buffer, number: number) =>
  fields(message).flatMap((field) => (field.number === number && Buffer.isBuffer(field.value) ? [field.value] : []))
const one = (message: Buffer, number: number) => fields(message).find((field) => field.number === number)?.value

/** KeyValue (1 key, 2 AnyValue: 1 string, 3 int) as a record. */
function attributes(messages: Buffer[]): Record<string, unknown> {
  return Object.fromEntries(
    messages.map((kv) => {
      const value = one(kv, 2) as Buffer
      const text = one(value, 1)
      const int = one(value, 3)
      return [(one(kv, 1) as Buffer).toString(), Buffer.isBuffer(text) ? text.toString() : Number(int)]
    }),
  )
}

/**
 * The spans of an ExportTraceServiceRequest (1 ResourceSpans: 1 Resource with 1 attributes, 2 ScopeSpans with 2
 * Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 9 attributes).
 */
export function decodeSpans(body: Buffer) {
  return all(body, 1).flatMap((resourceSpans) => {
    const resource = attributes(all((one(resourceSpans, 1) as Buffer | undefined) ?? Buffer.alloc(0), 1))
    return all(resourceSpans, 2).flatMap((scopeSpans) =>
      all(scopeSpans, 2).map((span) => {
        const parent = one(span, 4) as Buffer | undefined
        return {
          traceId: (one(span, 1) as Buffer).toString('hex'),
          spanId: (one(span, 2) as Buffer).toString('hex'),
          ...(parent !== undefined && parent.length > 0 && { parentSpanId: parent.toString('hex') }),
          name: (one(span, 5) as Buffer).toString(),
          kind: Number(one(span, 6) ?? 0n),
          attributes: attributes(all(span, 9)),
          resource,
        }
      }),
    )
  })
}
