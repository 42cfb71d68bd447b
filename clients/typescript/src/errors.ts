import { ErrorCode } from './generated/error-codes.js'

export { ErrorCode }

/** One of the catalogue's numbers. */
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode]

/** An answer of the API that is not a success: its HTTP status, the catalogue's `code` and the `message`. */
export class PlantStoreError extends Error {
  /** The HTTP status, say 409. */
  readonly status: number
  /** The catalogue's number, say 40901 (`ErrorCode.conflict`); undefined when the body was not the Error shape. */
  readonly code: ErrorCodeValue | undefined
  /** The answer's `X-Request-Id`, to quote to the service's operator. */
  readonly requestId: string | undefined

  constructor(status: number, code: number | undefined, message: string, requestId?: string) {
    super(message)
    this.name = 'PlantStoreError'
    this.status = status
    this.code = KNOWN.has(code) ? (code as ErrorCodeValue) : undefined
    this.requestId = requestId
  }
}

const KNOWN = new Set<unknown>(Object.values(ErrorCode))

/** The PlantStoreError for a failed answer whose body openapi-fetch has read (JSON when it parsed). */
export function toError(response: Response, body: unknown): PlantStoreError {
  const requestId = response.headers.get('x-request-id') ?? undefined
  if (typeof body === 'object' && body !== null && 'error' in body && 'message' in body) {
    const { error, message } = body as { error: unknown; message: unknown }
    if (typeof error === 'number' && typeof message === 'string') {
      return new PlantStoreError(response.status, error, message, requestId)
    }
  }
  const text = typeof body === 'string' && body !== '' ? `: ${body.slice(0, 200)}` : ''
  return new PlantStoreError(response.status, undefined, `HTTP ${response.status}${text}`, requestId)
}
