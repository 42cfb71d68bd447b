import { FormatRegistry, Kind, type TSchema, type TObject } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { SetErrorFunction, DefaultErrorFunction, ValueErrorType } from '@sinclair/typebox/errors'
import type { FastifySchemaCompiler } from 'fastify'
import { ApiError } from '../errors.js'
import { INT64_MAX, INT64_MIN, parseInt64 } from './int64.js'
import { bareObject, MALFORMED_PARAMETER, type ParsedQuery } from './query-string.js'
import { expected, TEXT_RULES } from '../text-rules.js'

SetErrorFunction((error) => {
  if (error.errorType === ValueErrorType.Kind && error.schema[Kind] === 'Int64') {
    return `expected an integer from ${INT64_MIN} to ${INT64_MAX}`
  }
  if (error.errorType === ValueErrorType.StringPattern) {
    const rule = TEXT_RULES.find((candidate) => candidate.pattern === error.schema.pattern)
    if (rule !== undefined) return expected(rule)
  }
  return DefaultErrorFunction(error).replace(/^Expected/, 'expected')
})

const INTEGER = /^-?(0|[1-9][0-9]*)$/
// RFC 3339 date-time (what OpenAPI's `date-time` means), and a real instant: not 2027-02-30.
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i
FormatRegistry.Set('date-time', (value) => {
  if (!DATE_TIME.test(value) || Number.isNaN(Date.parse(value))) return false
  const [year, month, day] = value.slice(0, 10).split('-').map(Number) as [number, number, number]
  return new Date(Date.UTC(year, month - 1, day)).getUTCDate() === day
})

/** Turns one query or path string into the type its schema asks for; leaves anything else to fail validation. */
function coerceScalar(schema: TSchema, raw: unknown): unknown {
  if (typeof raw !== 'string') return raw
  if (schema[Kind] === 'Int64') return parseInt64(raw) ?? raw
  if (schema[Kind] === 'Integer') return INTEGER.test(raw) && raw.length <= 16 ? Number(raw) : raw
  return raw
}

/**
 * Query strings and paths arrive as strings: coerce strictly ("1.5" stays a string and fails), then fill in the
 * defaults of absent properties. Their schemas are flat objects of scalars, so the defaults are found once, when
 * the route is compiled, rather than by walking the schema on every request (TypeBox's Value.Default).
 */
function partsCoercer(schema: TObject): (data: unknown) => unknown {
  const defaults = Object.entries(schema.properties)
    .filter(([, property]) => property.default !== undefined)
    .map(([key, property]) => [key, property.default as unknown] as const)
  return (data) => {
    if (typeof data !== 'object' || data === null) return data
    // Without Object.prototype: a `__proto__` parameter stays a key of its own, for the schema to refuse like any
    // unknown one.
    const out = bareObject<Record<string, unknown>>()
    for (const key in data) {
      const raw = (data as Record<string, unknown>)[key]
      const property = schema.properties[key]
      out[key] = property === undefined ? raw : coerceScalar(property, raw)
    }
    for (const [key, value] of defaults) if (out[key] === undefined) out[key] = value
    return out
  }
}

function describe(httpPart: string | undefined, path: string, message: string): string {
  const field = path.slice(1).replaceAll('/', '.')
  const part = httpPart === 'body' ? 'body' : httpPart === 'params' ? 'path' : (httpPart ?? 'request')
  return field === '' ? `${part}: ${message}` : `${part}.${field}: ${message}`
}

/**
 * Fastify validator compiler backed by TypeBox's compiled checks. It knows the
 * Int64 kind and reports the first problem with the field's name.
 */
export const validatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const check = TypeCompiler.Compile(schema)
  const coerce = httpPart === 'body' ? (data: unknown) => data : partsCoercer(schema as TObject)
  return (data: unknown) => {
    const malformed = (data as ParsedQuery | undefined)?.[MALFORMED_PARAMETER]
    if (malformed !== undefined) {
      return { error: new ApiError('validation', `${httpPart}.${malformed}: malformed percent-encoding`) }
    }
    const value = coerce(data)
    if (check.Check(value)) return { value }
    const first = check.Errors(value).First()
    const message = first === undefined ? 'invalid' : describe(httpPart, first.path, first.message)
    return { error: new ApiError('validation', message) }
  }
}
