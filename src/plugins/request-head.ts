import type { IncomingMessage } from 'node:http'
import type { ErrorKind } from '../errors.js'
import { sendError } from './error-handler.js'
import type { RequestGate } from './request-gates.js'

// Headers a request may carry once. Of a repeated one, Node keeps only the first in `headers`, so a second one would
// be ignored without a word: two tokens would authenticate as whichever came first, two hosts would route by the first.
const ONCE = ['authorization', 'host']
const DISPLAY: Record<string, string> = { authorization: 'Authorization', host: 'Host' }

/** The first header of ONCE that `rawHeaders` (name, value, name, value, ...) holds twice, if any. */
function repeated(rawHeaders: string[]): string | undefined {
  const seen: string[] = []
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    if (!ONCE.includes(name)) continue
    if (seen.includes(name)) return name
    seen.push(name)
  }
  return undefined
}

/** What is wrong with a request's head that Node lets through, or undefined. */
function headProblem(raw: IncomingMessage): { kind: ErrorKind; message: string } | undefined {
  // RFC 9112 §3.2: an HTTP/1.1 request without Host gets 400; HTTP/1.0 has no Host requirement.
  if (raw.httpVersionMajor === 1 && raw.httpVersionMinor === 1 && raw.headers.host === undefined) {
    return { kind: 'malformedRequest', message: 'an HTTP/1.1 request needs a Host header' }
  }
  const twice = repeated(raw.rawHeaders)
  if (twice !== undefined)
    return { kind: 'duplicateHeader', message: `${DISPLAY[twice]}: sent more than once; send it once` }
  return undefined
}

/**
 * Refuses heads Node parses but the service must not guess at, in the Error shape with `Connection: close`: an
 * HTTP/1.1 request without Host (Node's own refusal, turned off with requireHostHeader, had no body), and a second
 * Authorization or Host header. A request gate, before bearer authentication reads the header.
 */
export const admitHead: RequestGate = (request, reply) => {
  const problem = headProblem(request.raw)
  if (problem === undefined) return true
  reply.header('connection', 'close')
  sendError(reply, problem.kind, problem.message)
  return false
}
