import pinoPretty, { type PrettyOptions } from 'pino-pretty'
import { COMPLETED_FIELDS } from './request-log.js'

// What a `request completed` line carries besides its message: its fields, and the request id its logger binds.
const REQUEST_FIELDS = ['reqId', ...COMPLETED_FIELDS]

function isRequestLine(log: object): log is Record<string, unknown> {
  const line = log as Record<string, unknown>
  return typeof line.status === 'number' && typeof line.method === 'string' && typeof line.durationMs === 'number'
}

/**
 * The log stream for a terminal: a request on one line, what was asked and
 * how it went (`request completed: GET /plants 200 in 1.2 ms`), where pino-pretty gives each field a line of its own;
 * every other line, and a request line's error, as pino-pretty shows them. The JSON lines keep every field.
 */
export function prettyTerminal(options: PrettyOptions = {}) {
  // Undefined leaves the field out; anything else is printed as pino-pretty would have printed it.
  const unlessRequestLine = (value: unknown, _key: string, log: object) =>
    (isRequestLine(log) ? undefined : JSON.stringify(value, null, 2)) as string
  return pinoPretty({
    ...options,
    translateTime: 'SYS:HH:MM:ss.l',
    // Written as it comes: nothing is lost at exit, and a terminal's few lines a second cost nothing.
    sync: true,
    ignore: 'pid,hostname,trace_id,span_id',
    messageFormat: (log, messageKey) => {
      const message = String(log[messageKey] ?? '')
      if (!isRequestLine(log)) return message
      return `${message}: ${String(log.method)} ${String(log.url)} ${String(log.status)} in ${String(log.durationMs)} ms`
    },
    customPrettifiers: Object.fromEntries(REQUEST_FIELDS.map((field) => [field, unlessRequestLine])),
  })
}
