import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino'
import { TOKEN_PREFIX } from '../auth/tokens.js'

const CENSOR = '[Redacted]'

// What holds a bearer secret: one of the service's own tokens, or a JWT (a base64url JSON header, `eyJ`, then a dot).
const SECRET_SHAPE = new RegExp(`${TOKEN_PREFIX}[A-Za-z0-9_-]|eyJ[A-Za-z0-9_-]*\\.`)
// Query parameters named for a credential whatever their value looks like: RFC 6750 §2.3's `access_token`, and any
// name ending in token, key, secret or password (`token`, `id_token`, `api_key`, `apiKey`), with a bracketed suffix
// as form encoders write arrays and objects (`access_token[]`, `token[0]`).
const SECRET_PARAM = /(token|key|secret|password)(\[[^\]]*\])*$/i
// Everything a credential in a URL needs: a token's or a JWT's prefix, a name made for one, or an escape that may
// spell either.
const MAY_HOLD_SECRET = new RegExp(`${TOKEN_PREFIX}|eyJ|token|key|secret|password|%|\\+`, 'i')

/** `part` with its percent-escapes read as bytes, `+` as space: never throws, and keeps ASCII as the client meant. */
function unescaped(part: string): string {
  if (!part.includes('%') && !part.includes('+')) return part
  return part
    .replaceAll('+', ' ')
    .replace(/%[0-9A-Fa-f]{2}/g, (escape) => String.fromCharCode(parseInt(escape.slice(1), 16)))
}

const secretShaped = (part: string): boolean => SECRET_SHAPE.test(unescaped(part))

function redactedParam(pair: string): string {
  const eq = pair.indexOf('=')
  const name = eq === -1 ? pair : pair.slice(0, eq)
  if (secretShaped(name)) return CENSOR
  if (eq === -1) return pair
  const secret = SECRET_PARAM.test(unescaped(name)) || secretShaped(pair.slice(eq + 1))
  return secret ? `${name}=${CENSOR}` : pair
}

/**
 * A request's URL fit for a log line: the value of a query parameter that may carry a credential (`access_token`,
 * `token`, a name ending in token, key, secret or password, or any value shaped like a `pst_` token or a JWT) and any path segment shaped like one replaced by
 * `[Redacted]`; the rest (the path, other parameters) kept, it helps diagnose. Clients put tokens there
 * (`?access_token=` is a form RFC 6750 describes, `DELETE /tokens/{id}` gets a secret by mistake), and the service
 * must not write them to its logs, even for a request it refuses.
 */
export function redactRequestUrl(url: string): string {
  // Most URLs hold nothing that could be, or hide, a credential: one scan answers for them.
  if (!MAY_HOLD_SECRET.test(url)) return url
  const mark = url.indexOf('?')
  const path = mark === -1 ? url : url.slice(0, mark)
  const query = mark === -1 ? undefined : url.slice(mark + 1)
  const pathSecret = secretShaped(path)
  if (!pathSecret && query === undefined) return url
  const shownPath = pathSecret
    ? path
        .split('/')
        .map((segment) => (secretShaped(segment) ? CENSOR : segment))
        .join('/')
    : path
  return query === undefined ? shownPath : `${shownPath}?${query.split('&').map(redactedParam).join('&')}`
}

type WithHeaders = { headers: Record<string, unknown> }

function carriesAuthorization(value: unknown): value is WithHeaders {
  if (typeof value !== 'object' || value === null) return false
  const { headers } = value as { headers?: unknown }
  return typeof headers === 'object' && headers !== null && 'authorization' in headers
}

/**
 * A copy of `value` with the same prototype and property descriptors, `key` set to `replacement`: an Error keeps
 * its message and stack (and stays an Error) for the err serializer, a request keeps what the req serializer reads.
 * Its descriptor is replaced, not its value assigned, so a read-only or getter-only property is replaced too. The
 * original, which the caller may still use, is left alone.
 */
function copyWith<T extends object>(value: T, key: string, replacement: unknown): T {
  const descriptors: PropertyDescriptorMap = Object.getOwnPropertyDescriptors(value)
  // An accessor is read on the original: an Error's own `stack` is one in newer V8 (Node 26), and its getter finds
  // nothing on a copy.
  for (const [name, descriptor] of Object.entries(descriptors)) {
    if (descriptor.get === undefined) continue
    const read = (value as Record<string, unknown>)[name]
    descriptors[name] = { value: read, enumerable: descriptor.enumerable ?? false, writable: true, configurable: true }
  }
  descriptors[key] = { value: replacement, enumerable: true, writable: true, configurable: true }
  return Object.create(Object.getPrototypeOf(value) as object | null, descriptors) as T
}

const censored = <T extends WithHeaders>(value: T): T =>
  copyWith(value, 'headers', { ...value.headers, authorization: CENSOR })

/**
 * An object about to be logged with every Authorization header it carries at the top level (`headers`) or one
 * level down (`req.headers`, `err.headers`, any key) censored; the same object when there is none, which is the
 * common case and costs a loop over its keys.
 */
export function withoutSecrets<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value
  let result = carriesAuthorization(value) ? censored(value) : value
  for (const key in value) {
    const child = (value as Record<string, unknown>)[key]
    if (key === 'headers' || !carriesAuthorization(child)) continue
    result = copyWith(result, key, censored(child))
  }
  return result
}

/**
 * A pino logger that censors Authorization headers before pino sees them, whatever a log call, a message's
 * interpolated arguments or a child logger's bindings (every request's, and any child's children) carry.
 *
 * pino's own `redact` did this with the paths `headers.authorization` and `*.headers.authorization`, but a
 * wildcard path makes it run its redactor, which parses the paths again on every call, on every value of every
 * line and binding: about 4 µs per request. Here a line without headers costs a loop over its top-level keys.
 */
export function redactingLogger(options: LoggerOptions, stream?: DestinationStream): Logger {
  const logger = pino(
    {
      ...options,
      hooks: {
        logMethod(args, method) {
          for (let i = 0; i < args.length; i++) args[i] = withoutSecrets(args[i])
          method.apply(this, args)
        },
      },
    },
    stream as DestinationStream,
  )
  // Children are made with Object.create(parent), so they inherit this method, and so do theirs.
  const child = logger.child
  logger.child = function (this: Logger, bindings, childOptions) {
    return child.call(this, withoutSecrets(bindings), childOptions)
  } as typeof child
  return logger
}
