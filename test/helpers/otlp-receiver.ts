import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeSpans } from './otlp-protobuf.js'

/** A span as OTLP/JSON writes it, with its resource's attributes beside it. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes: Record<string, unknown>
  resource: Record<string, unknown>
}

type Attributes = Array<{ key: string; value: Record<string, unknown> }>
const flat = (attributes: Attributes = []) =>
  Object.fromEntries(attributes.map(({ key, value }) => [key, Object.values(value)[0]]))

interface ExportRequest {
  resourceSpans: Array<{
    resource: { attributes: Attributes }
    scopeSpans: Array<{ spans: Array<Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes: Attributes }> }>
  }>
}

/**
 * An OTLP/HTTP collector of the test's own, on loopback, for JSON and protobuf alike: it keeps every span, and every
 * body and content type as they came; or, while told to fail, answers every export with an error.
 */
export async function startOtlpReceiver() {
  const spans: ReceivedSpan[] = []
  const bodies: Buffer[] = []
  const contentTypes: string[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      bodies.push(body)
      contentTypes.push(String(req.headers['content-type']))
      if (req.url !== '/v1/traces') return void res.writeHead(404).end()
      if (receiver.failWith !== undefined) {
        receiver.refused++
        return void res.writeHead(receiver.failWith).end()
      }
      if (String(req.headers['content-type']).startsWith('application/x-protobuf')) spans.push(...decodeSpans(body))
      else {
        for (const { resource, scopeSpans } of (JSON.parse(body.toString()) as ExportRequest).resourceSpans) {
          for (const span of scopeSpans.flatMap((scope) => scope.spans)) {
            spans.push({ ...span, attributes: flat(span.attributes), resource: flat(resource.attributes) })
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const receiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    contentTypes,
    /** While set, every export is answered with this status (500: a collector failing), its spans kept nowhere. */
    failWith: undefined as number | undefined,
    /** Exports answered with `failWith`. */
    refused: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
  return receiver
}
