import { isIP } from 'node:net'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { JwtSettings } from './auth/jwt-auth.js'
import { keyUrlAllowed, looksLikeJwt } from './auth/jwt-shapes.js'
import { RATE_PATTERN } from './limits/rate.js'
import { redactUrl } from './redact.js'
import { LIMIT_MAX } from './schemas/list-query.js'
import { DELIVERY_POOL_SIZE, type StorageLimits } from './storage/index.js'

export const DEFAULT_DATABASE_URL = 'sqlite:./data/plantstore.db'

/** How long a client may take: to send the request head, the whole request, and between requests on a connection. */
export interface HttpTimeouts {
  headersMs: number
  requestMs: number
  keepAliveMs: number
}

/** Keep-alive above the 60 s idle timeout common in load balancers, so the balancer closes first. */
export const HTTP_TIMEOUT_DEFAULTS: HttpTimeouts = { headersMs: 10_000, requestMs: 30_000, keepAliveMs: 72_000 }

/**
 * Open connections one process takes, in all and from one client address (the TCP peer, unless a trusted proxy), and
 * how long a connection's answers may wait unread, not moving at all, before it is closed.
 */
export interface ConnectionLimits {
  max: number
  perAddress: number
  writeStallMs: number
}

/**
 * Server-wide 10,000: far more than one process serves at once, well under the open-file limit Node raises at start,
 * and about 40 MB of socket state if every one sits idle (measured: 5,000 idle took 20 MB). Per address 256: a NAT of
 * dozens of browsers (6 each), or a backend whose HTTP client opens a connection per concurrent request (Node's fetch
 * does), fits; one address cannot take the server-wide budget. A connection that reads nothing holds one unsent
 * answer, a page (300 KB for 1,000 plants of 300 characters; at most about 2 MB, if every character is one JSON
 * escapes), so one address holds at most 256 of them, and only until the stall timeout. Stall 30 s, as long as a client has to send its request: a client taking its answer
 * at 32 KB/s or more completes each write within it (the kernel takes much of it at once); one that reads nothing is
 * closed.
 */
export const CONNECTION_LIMIT_DEFAULTS: ConnectionLimits = { max: 10_000, perAddress: 256, writeStallMs: 30_000 }

/**
 * The listen backlog: Linux's default `net.core.somaxconn` since 5.4, and what it grants at most, so the queue is as
 * long as the kernel allows unless an operator raised that. Node's default, 511, was filled by one client opening
 * 2,000 connections at once, and every connection attempt arriving then (anyone's) waited 1 s for a retransmission.
 */
export const LISTEN_BACKLOG_DEFAULT = 4096

/**
 * Rows of pages (GET /plants, weighted by `limit`) one account, and one process in all, may have in progress at once;
 * and the percent of an even share of a busy event loop's time one account's pages may take (see PageShares).
 */
export interface PageBudgetLimits {
  perAccount: number
  perProcess: number
  /** 0 turns the shares off; without it, PAGE_BUDGET_DEFAULTS' */
  sharePercent?: number
}

/**
 * Of an even share of a busy event loop's time (the last second over the N accounts that asked for pages in it), the
 * part one account's pages may take. Half: the time charged is a page's handler and serialisation, and each page
 * costs its account about as much again uncharged (its connection, reading its request, writing its answer). With a
 * CPU burner beside big-page-fairness.test.ts, a whole even share left the other account at p50 59-253 ms, p99
 * 150-430 ms (3 ms and 50-85 ms without the attack); half kept it at p50 4-6 ms, p99 57-83 ms, and the attacker still
 * had 450-500 pages of 1,000 made in 5 s.
 */
export const PAGE_SHARE_PERCENT_DEFAULT = 50

/**
 * Per account 1,000 rows: one page of the largest size, ten of the default 100, fifty of 20 (the benchmark's 50
 * connections). A page holds its rows while it is made and written, and until the event loop's next turn, since the
 * kernel often takes a whole page at once: so the bound is also what one account may make the event loop do before
 * others get their turn, a 1,000-row page of 330 KB being a few milliseconds (2,000 let another account's p99 come
 * close to 200 ms on SQLite in test/cli/big-page-fairness.test.ts). A page kept out waits for rows to come back (up to
 * 1 s, 8 pages of one account at most), so a client reading page after page, or a few pages in parallel while the
 * database makes them, is served; only an account's pages held past that (by a client that reads slowly, or too
 * many at once) are refused, with `Retry-After: 1`. Per process 8,000: eight accounts at their bound. Pages whose
 * clients have not read them within 250 ms leave it for a bound of their own of the same size (see PageBudget), so
 * the two bound the pages held in memory for clients that read slowly (about 5.3 MB at 330 bytes a row; 32 MB if
 * every character is one that JSON escapes).
 */
export const PAGE_BUDGET_DEFAULTS = { perAccount: 1_000, perProcess: 8_000, sharePercent: PAGE_SHARE_PERCENT_DEFAULT }

export const HOUR_MS = 3_600_000

/** How long an idempotency key's answer is kept unless PLANTSTORE_IDEMPOTENCY_KEY_HOURS says: a day, Stripe's figure. */
export const IDEMPOTENCY_KEY_HOURS_DEFAULT = 24

/** How long a browser may reuse a CORS preflight's answer: a changed PLANTSTORE_CORS_ORIGINS reaches browsers within it. */
export const CORS_MAX_AGE_SECONDS = 600

/** What a setting is, for people: the flag that also sets it, what it means, and how a valid value looks. */
export interface SettingDoc {
  /** For --help and docs/configuration.md; Markdown code spans allowed. */
  description: string
  /** The `plantstore serve` flag that sets it too (it wins over the environment). */
  flag?: string
  /** What an integer counts, said after its bounds in messages: `milliseconds`. */
  unit?: string
  /** A rule against another setting, said after the bounds: `at most HTTP_REQUEST_TIMEOUT_MS`. */
  also?: string
  /** How a valid value looks, where the schema can only say it as a pattern. */
  expected?: string
  /** Its value is never printed, not even when it is refused. */
  secret?: boolean
}

const integer = (minimum: number, maximum: number, fallback: number, doc: SettingDoc) =>
  Type.Integer({ minimum, maximum, default: fallback, ...doc })
const milliseconds = (fallback: number, doc: SettingDoc) =>
  integer(100, 3_600_000, fallback, { unit: 'milliseconds', ...doc })
const seconds = (fallback: number, doc: SettingDoc) => integer(0, 3600, fallback, { unit: 'seconds', ...doc })
const hours = (maximum: number, fallback: number, doc: SettingDoc) =>
  integer(1, maximum, fallback, { unit: 'hours', ...doc })
const yesNo = (fallback: boolean, doc: SettingDoc) => Type.Boolean({ default: fallback, ...doc })
const text = (pattern: string, fallback: string, doc: SettingDoc & { expected: string }) =>
  Type.String({ pattern, default: fallback, ...doc })
const optionalText = (pattern: string, doc: SettingDoc & { expected: string }) =>
  Type.Optional(Type.String({ pattern, ...doc }))

// An origin as browsers serialise it: lowercase scheme and host (a name, IPv4, or IPv6 in brackets), an optional port.
const ORIGIN = 'https?://([a-z0-9-]+(\\.[a-z0-9-]+)*|\\[[0-9a-f:.]+\\])(:[0-9]{1,5})?'
const TOKEN_CHARACTERS = 'characters from A-Z a-z 0-9 - . _ ~ + /'
const URL_PATTERN = '^https?://[!-~]{1,2000}$'
const URL_EXPECTED = 'an https:// URL (http:// for a loopback host only)'
/** Asymmetric JWS algorithms a JWT may be signed with (RFC 8725 §3.1: no `none`, and no HMAC with a shared key). */
export const JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
]
// One algorithm of the list, for the pattern of PLANTSTORE_JWT_ALGORITHMS.
const ALGORITHM = JWT_ALGORITHMS.join('|')

/**
 * Every setting the service reads: its environment variable, type, bounds and default, and its documentation. The
 * one source of each: validation and its messages, `plantstore serve --help` and docs/configuration.md derive
 * from it (`npm run docs`; a test fails when the file is not what this would generate).
 */
export const ConfigSchema = Type.Object({
  PORT: integer(0, 65535, 8080, { flag: '--port', description: 'TCP port to listen on (0 picks a free one).' }),
  HOST: Type.String({
    minLength: 1,
    default: '127.0.0.1',
    flag: '--host',
    expected: 'a host name or address to listen on',
    description: 'Address to listen on (`0.0.0.0` for all interfaces).',
  }),
  WORKERS: integer(1, 256, 1, {
    flag: '--workers',
    description:
      'Server processes sharing the port on this machine (`$(nproc)` uses every core). The primary migrates (or checks the schema) once, workers never migrate; each worker has its own pool, token cache and metrics.',
  }),
  DATABASE_URL: text('^(sqlite:.+|postgres(ql)?://.+)', DEFAULT_DATABASE_URL, {
    flag: '--database',
    expected: 'a URL like sqlite:./data/plantstore.db or postgres://user:password@host:5432/database',
    description:
      'Storage: `sqlite:<path>` (relative to the working directory; folders are created) or `postgres://user:password@host:5432/database` (`postgresql://` too; `sslmode=require` is read by the client; other query parameters such as `search_path`, `statement_timeout`, `lock_timeout` are sent to the server as settings of each connection).',
  }),
  DATABASE_POOL_SIZE: integer(1, 1000, 10, {
    description: `PostgreSQL: most connections each process opens for requests; webhook delivery (and the queued-deliveries count of \`/metrics\`) opens up to ${DELIVERY_POOL_SIZE} more of its own when first used, so instances × (pool size + ${DELIVERY_POOL_SIZE}) must stay under the server's \`max_connections\`.`,
  }),
  DATABASE_MIGRATE_ON_START: yesNo(true, {
    description:
      "`true`: apply pending migrations at start; `false`: refuse to start on a database that lacks one (run `plantstore migrate` first), so the service's database role needs no DDL rights.",
  }),
  HTTP_HEADERS_TIMEOUT_MS: milliseconds(HTTP_TIMEOUT_DEFAULTS.headersMs, {
    also: 'at most HTTP_REQUEST_TIMEOUT_MS',
    description: 'A client must send the whole request head within this, else 408 and the connection closes.',
  }),
  HTTP_REQUEST_TIMEOUT_MS: milliseconds(HTTP_TIMEOUT_DEFAULTS.requestMs, {
    description: 'The whole request, body included, must arrive within this, else 408.',
  }),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: milliseconds(HTTP_TIMEOUT_DEFAULTS.keepAliveMs, {
    description:
      "An idle keep-alive connection is closed after this; keep it above the load balancer's idle timeout (often 60 s) so the balancer closes first.",
  }),
  HTTP_MAX_CONNECTIONS: integer(1, 1_000_000, CONNECTION_LIMIT_DEFAULTS.max, {
    unit: 'open connections per process',
    description:
      'Open connections one process takes (per worker with `WORKERS`); past it a new connection is answered 503 (50303) with `Retry-After: 1` and `Connection: close` before its request is read, then closed. Keep it under the open-file limit.',
  }),
  HTTP_MAX_CONNECTIONS_PER_ADDRESS: integer(1, 1_000_000, CONNECTION_LIMIT_DEFAULTS.perAddress, {
    unit: 'open connections per client address',
    description:
      'Open connections from one client address (the TCP peer; IPv6 per /64; per worker); past it 429 (42903), as above. Peers `TRUST_PROXY` trusts (with `true` or a hop count: every peer) are capped only by `HTTP_MAX_CONNECTIONS`, so limit per client at the proxy.',
  }),
  HTTP_LISTEN_BACKLOG: integer(1, 1_000_000, LISTEN_BACKLOG_DEFAULT, {
    unit: 'connections waiting to be accepted',
    description:
      "New connections the kernel holds while the process is busy (the listen backlog); one arriving when they are full is dropped, and its client tries again only after 1 s, then 3 s. Linux grants at most `net.core.somaxconn` (4096 by default since Linux 5.4, 128 before): the start warns when that is lower (docs/operations.md, Connection bursts). Node's own 511 was filled by one client's burst of 2,000 connections.",
  }),
  HTTP_WRITE_STALL_TIMEOUT_MS: milliseconds(CONNECTION_LIMIT_DEFAULTS.writeStallMs, {
    description:
      'A connection with answers waiting and no write to it completed for this long (its client stopped reading) is closed with a reset; a client that keeps reading, however slowly, is not affected.',
  }),
  PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT: integer(LIMIT_MAX, 100_000_000, PAGE_BUDGET_DEFAULTS.perAccount, {
    unit: 'rows of pages in progress per account',
    description:
      "Rows of `GET /plants` pages (each counted as its `limit`) one account may have in progress at once per process: from the start of the handler until the answer is handed to the socket and the event loop has turned once (a client that reads slowly keeps its pages in progress). A page kept out waits for rows to come back, up to 1 s and 8 pages of one account at most; past that 429 (42904) with `Retry-After: 1`, so one account's big pages cannot keep other accounts waiting.",
  }),
  PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS: integer(LIMIT_MAX, 100_000_000, PAGE_BUDGET_DEFAULTS.perProcess, {
    unit: 'rows of pages in progress per process',
    description:
      'The same over all accounts together (per worker with `WORKERS`); past it 503 (50304) with `Retry-After: 1`. A page whose client has not taken it 250 ms after its handler started is set aside: it still counts for its account but no longer here, so accounts that do not read cannot keep out those that do. Pages set aside have a bound of their own, this number again: past it, connections are closed, the oldest page of the account with the most set aside first. Together they bound the memory pages held for slow readers take.',
  }),
  PLANTSTORE_PAGE_SHARE_PERCENT: integer(0, 100, PAGE_BUDGET_DEFAULTS.sharePercent, {
    unit: 'percent of an even share',
    description:
      "While the event loop is at least half busy (and for a second after), the part of an even share of its time (the last second divided among the accounts that asked for pages in it) one account's `GET /plants` pages may take, each counted as the event loop time its handler takes before its first wait (on SQLite the whole page; on PostgreSQL, which makes the page's JSON itself, little). Past it a page waits for the account's time to decay, up to 1 s and 8 pages of one account, then 429 (42905) with `Retry-After: 1`. An account alone, or on a loop with time to spare, is never kept waiting. 0 turns it off.",
  }),
  SHUTDOWN_DRAIN_SECONDS: seconds(0, {
    description:
      "On SIGTERM or SIGINT, how long to keep serving while `GET /readyz` answers 503, so a load balancer stops sending traffic before the listener closes; set it to the balancer's health-check interval × its failure threshold.",
  }),
  SHUTDOWN_GRACE_SECONDS: seconds(10, {
    description:
      'Then, once the listener is closed, how long requests in flight may take to finish before their connections are cut; the process exits 0 either way.',
  }),
  SHUTDOWN_TRACE_FLUSH_MS: integer(100, 60_000, 2000, {
    unit: 'milliseconds',
    description:
      'With tracing on, then, how long the spans still buffered may take to reach the collector. Those a collector that hangs or refuses has not taken by then are dropped, said in one warning line (`tracing: N spans dropped at stop`), and the process still exits 0.',
  }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    {
      default: 'info',
      description:
        'Logs go to stdout: JSON lines, one per request when it completes (request id, method, route, URL, status, duration, client address as `TRUST_PROXY` resolves it (a `CONNECT`’s: its TCP peer), account and token id; never the token: the `Authorization` header is redacted everywhere, and so is, in the URL, the value of a parameter named for a credential (`access_token`, `token`, any name ending in token, key, secret or password), any parameter value and any path segment shaped like a `pst_` token or a JWT), and one per connection refused by a connection cap (its peer address and the cap), human-readable when stdout is a terminal (pino-pretty, a request on one line: method, URL, status, time). The line that shows the first start’s token is written whatever the level.',
    },
  ),
  PLANTSTORE_RATE_LIMIT: text(RATE_PATTERN, '100/s', {
    expected: 'requests per token like 100/s, 6000/min or 5000/h, or 0 for no limit',
    description:
      "Requests per token (a JWT's: per account and subject; `0` turns it off), as a budget that refills continuously: `q/w` holds at most `q` requests, one more every `w/q`, so the unit sets the burst (`100/s`: 100 at once, `6000/min`: 6000) and a client at the sustained rate is never refused. Past it 429 with `Retry-After`; every answer says what is left (`RateLimit`, `RateLimit-Policy`).",
  }),
  PLANTSTORE_ACCOUNT_RATE_LIMIT: text(RATE_PATTERN, '500/s', {
    expected: 'requests per account like 500/s, 30000/min or 300000/h, or 0 for no limit',
    description:
      "Requests per account over all of its tokens and JWT subjects (`0` turns it off), so that making more tokens does not make more budget; refilled as `PLANTSTORE_RATE_LIMIT` is. Requests a token's own limit refused are not counted. Five busy tokens' worth by default: raise it for one tenant with many clients.",
  }),
  PLANTSTORE_AUTH_FAILURE_LIMIT: text(RATE_PATTERN, '20/min', {
    expected: 'failed authentications per client address like 20/min, or 0 for no limit',
    description:
      'Failed authentications (malformed, unknown, expired or revoked token) per client address, refilled as `PLANTSTORE_RATE_LIMIT` is (`20/min`: 20 at once, then one every 3 s); with none left, every request from that address to a route that takes a token gets 429, with a valid token or with none, until one is refilled (`0`: off).',
  }),
  TRUST_PROXY: text('^(true|false|[0-9]{1,2}|[0-9a-fA-F:.,/ ]+)$', 'false', {
    expected: 'false, true, a hop count, or comma-separated proxy addresses/CIDRs',
    description:
      "Which reverse proxies' `X-Forwarded-For` names the client: `true`, a hop count, or comma-separated addresses/CIDRs; used for the per-address limits and logs. Never `true` when clients can reach the service directly.",
  }),
  PLANTSTORE_CORS_ORIGINS: optionalText(`^${ORIGIN}( *, *${ORIGIN})*$`, {
    expected: 'comma-separated origins like https://app.example.com,http://localhost:5173 (lowercase, no path)',
    description: `Browser origins allowed to call the API (CORS), exactly as browsers send them: scheme, host, and the port unless it is the scheme's default. A preflight from one of them is answered 204 without a token and counts against no limit (browsers keep its answer for ${CORS_MAX_AGE_SECONDS} s), allowing \`Authorization\`, \`Content-Type\` and \`Idempotency-Key\`; answers to one of them carry \`Access-Control-Allow-Origin\` and expose \`Link\`, \`Retry-After\`, the rate-limit headers, \`WWW-Authenticate\`, \`Idempotent-Replayed\` and \`X-Request-Id\`. Without it, no CORS headers at all.`,
  }),
  REDIS_URL: optionalText('^rediss?://.+', {
    expected: 'a URL like redis://host:6379 or rediss://user:password@host:6380',
    description: 'Share both rate limits across instances; without it each process counts alone.',
  }),
  PLANTSTORE_METRICS_TOKEN: optionalText('^[A-Za-z0-9\\-._~+/]{16,512}$', {
    secret: true,
    expected: `16 to 512 ${TOKEN_CHARACTERS}`,
    description:
      '`GET /metrics` needs `Authorization: Bearer <it>`; without it `/metrics` is open (keep it off the public listener then).',
  }),
  PLANTSTORE_BOOTSTRAP_TOKEN: optionalText('^[A-Za-z0-9\\-._~+/]{32,512}$', {
    secret: true,
    expected: `32 to 512 ${TOKEN_CHARACTERS}`,
    description:
      "On a store with no tokens, seed this value as the `default` account's token instead of generating and printing one; for containers and scripts.",
  }),
  PLANTSTORE_MAX_TOKENS_PER_ACCOUNT: integer(1, 10_000, 100, {
    unit: 'tokens per account',
    description:
      'Tokens not revoked (expired ones included, until deleted) an account may hold for `POST /tokens` to make another; past it 409 (40902). The CLI is not capped.',
  }),
  PLANTSTORE_JWT_ISSUER: optionalText(URL_PATTERN, {
    expected: URL_EXPECTED,
    description:
      'Turns on JWT access tokens from your identity provider: the `iss` they must carry, exactly. Needs `PLANTSTORE_JWT_AUDIENCE`. `http://` only for a loopback host.',
  }),
  PLANTSTORE_JWT_AUDIENCE: optionalText('^[!-~]{1,512}$', {
    expected: '1 to 512 visible ASCII characters, such as https://plants.example.com',
    description: 'The `aud` a JWT must hold (one of its values): the identifier your identity provider gives this API.',
  }),
  PLANTSTORE_JWT_JWKS_URL: optionalText(URL_PATTERN, {
    expected: URL_EXPECTED,
    description:
      "Where the issuer's signing keys are; without it, the `jwks_uri` of the issuer's `/.well-known/openid-configuration`. `http://` only for a loopback host.",
  }),
  PLANTSTORE_JWT_ACCOUNT_CLAIM: text('^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$', 'sub', {
    expected: 'a claim name like sub, client_id or tenant',
    description:
      "The claim whose value names the caller's account (created on first use, shared with the CLI's tokens of that name). Pick one the provider sets, never one users can choose.",
  }),
  PLANTSTORE_JWT_ALGORITHMS: text(`^(${ALGORITHM})(,(${ALGORITHM}))*$`, 'RS256,ES256,EdDSA', {
    expected: `a comma-separated list of ${JWT_ALGORITHMS.join(', ')} (never none or HMAC)`,
    description: 'Signature algorithms a JWT may use; `none` and the HMAC ones (`HS256`…) are refused.',
  }),
  PLANTSTORE_JWT_CLOCK_TOLERANCE: integer(0, 300, 30, {
    unit: 'seconds',
    description: "Leeway for `exp`, `nbf` and `iat` against this machine's clock.",
  }),
  PLANTSTORE_WEBHOOK_DELIVERY: yesNo(true, {
    description: 'Whether this instance delivers webhooks (every instance may: claims never overlap).',
  }),
  PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: yesNo(false, {
    description:
      'Let subscriptions name private, loopback and link-local addresses (for tests and private networks); read by the process that checks: the server, or the CLI for `webhooks add`.',
  }),
  PLANTSTORE_WEBHOOK_TIMEOUT_MS: milliseconds(10_000, {
    description: 'How long a receiver may take to answer one delivery attempt.',
  }),
  PLANTSTORE_WEBHOOK_RETRY_BASE_MS: milliseconds(5_000, {
    description: "The first retry's delay; each further one doubles, with jitter, up to an hour.",
  }),
  PLANTSTORE_WEBHOOK_GIVE_UP_HOURS: hours(720, 24, {
    description:
      'A subscription whose attempts have all failed for this long is disabled, reason `failing`; one success starts the clock over.',
  }),
  PLANTSTORE_WEBHOOK_FAILED_RETENTION_HOURS: hours(8760, 168, {
    description: 'Failed deliveries are purged after this.',
  }),
  PLANTSTORE_WEBHOOK_CONCURRENCY: integer(1, 1024, 16, {
    unit: 'attempts in flight per process',
    description:
      'Delivery attempts in flight at once per process. A quarter of them (at least one of two or more) is kept for accounts with no attempt in flight anywhere, one each; when every slot is busy all the same, the attempt running longest (past a second) is cut for such an account, so accounts whose receivers never answer cannot keep another waiting for a timeout.',
  }),
  PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: integer(1, 1024, 4, {
    unit: 'attempts in flight per account',
    description: "Delivery attempts in flight at once for one account's subscriptions, over every instance.",
  }),
  PLANTSTORE_WEBHOOK_MAX_QUEUED: integer(1, 10_000_000, 10_000, {
    unit: 'deliveries queued per subscription',
    description:
      'Undelivered events one subscription may hold; a change that finds it full disables it, reason `backlog`.',
  }),
  PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: integer(1, 10_000, 10, {
    unit: 'webhook subscriptions per account',
    description: 'Webhook subscriptions per account; past it 409 (40902).',
  }),
  PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: integer(0, 999_999_999, 1_000_000, {
    unit: 'plants per account; 0 for no limit',
    description:
      'Plants per account; past it 409 (40902). Exact on both backends, with any number of instances. On PostgreSQL, once it is lowered, an account may pass the new value by at most the plants it held then.',
  }),
  PLANTSTORE_IDEMPOTENCY_KEY_HOURS: hours(168, IDEMPOTENCY_KEY_HOURS_DEFAULT, {
    description:
      'How long the answer to a request sent with an `Idempotency-Key` is kept, and replayed to a retry with that key; expired keys are purged.',
  }),
  PLANTSTORE_MAX_IDEMPOTENCY_KEYS_PER_ACCOUNT: integer(0, 999_999_999, 1_000_000, {
    unit: 'keys per account; 0 for no limit',
    description:
      'Idempotency keys one account holds until they expire (as many as plants by default: a day of creates with keys fits); past it 409 (40902). On PostgreSQL, requests racing at the limit may pass it by as many as run at once.',
  }),
})
export type Config = Static<typeof ConfigSchema>
export type ConfigKey = keyof Config

/** Each setting's schema, with its documentation. */
export function settingOf(key: ConfigKey): TSchema & SettingDoc {
  return ConfigSchema.properties[key] as TSchema & SettingDoc
}

/** Every setting's name, in the order the schema lists them. */
export const CONFIG_KEYS = Object.keys(ConfigSchema.properties) as ConfigKey[]

/** How a valid value of the setting looks, in words: from its type and bounds, or as the setting says. */
export function expectedValue(key: ConfigKey): string {
  const setting = settingOf(key)
  if (setting.expected !== undefined) return setting.expected
  if (setting.type === 'boolean') return 'true or false'
  if (setting.type === 'integer') {
    const unit = setting.unit === undefined ? '' : ` (${setting.unit})`
    const also = setting.also === undefined ? '' : `, ${setting.also}`
    return `an integer from ${setting.minimum as number} to ${setting.maximum as number}${unit}${also}`
  }
  const values = (setting.anyOf as Array<{ const: string }> | undefined)?.map((option) => option.const)
  return values === undefined ? 'a valid value' : `one of ${values.join(', ')}`
}

/** The default of a setting as text, or undefined when it has none. */
export function defaultText(key: ConfigKey): string | undefined {
  const fallback = settingOf(key).default as unknown
  return fallback === undefined ? undefined : String(fallback)
}

/** JWT access tokens when PLANTSTORE_JWT_ISSUER turns them on, from the configuration; undefined otherwise. */
export function jwtSettings(config: Config): JwtSettings | undefined {
  if (config.PLANTSTORE_JWT_ISSUER === undefined || config.PLANTSTORE_JWT_AUDIENCE === undefined) return undefined
  return {
    issuer: config.PLANTSTORE_JWT_ISSUER,
    audience: config.PLANTSTORE_JWT_AUDIENCE,
    jwksUrl: config.PLANTSTORE_JWT_JWKS_URL,
    accountClaim: config.PLANTSTORE_JWT_ACCOUNT_CLAIM,
    algorithms: config.PLANTSTORE_JWT_ALGORITHMS.split(','),
    clockToleranceSeconds: config.PLANTSTORE_JWT_CLOCK_TOLERANCE,
  }
}

/** The per-account quotas the storage enforces, from the configuration. */
export function storageLimits(config: Config): StorageLimits {
  return {
    plantsPerAccount: config.PLANTSTORE_MAX_PLANTS_PER_ACCOUNT,
    subscriptionsPerAccount: config.PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT,
    queuedPerSubscription: config.PLANTSTORE_WEBHOOK_MAX_QUEUED,
    idempotencyKeysPerAccount: config.PLANTSTORE_MAX_IDEMPOTENCY_KEYS_PER_ACCOUNT,
  }
}

/** How long an idempotency key's answer is kept, from the configuration. */
export function idempotencyKeyTtlMs(config: Config): number {
  return config.PLANTSTORE_IDEMPOTENCY_KEY_HOURS * HOUR_MS
}

/** How webhooks are delivered, in the dispatcher's units. */
export function deliverySettings(config: Config) {
  return {
    timeoutMs: config.PLANTSTORE_WEBHOOK_TIMEOUT_MS,
    retryBaseMs: config.PLANTSTORE_WEBHOOK_RETRY_BASE_MS,
    giveUpAfterMs: config.PLANTSTORE_WEBHOOK_GIVE_UP_HOURS * HOUR_MS,
    failedRetentionMs: config.PLANTSTORE_WEBHOOK_FAILED_RETENTION_HOURS * HOUR_MS,
    concurrency: config.PLANTSTORE_WEBHOOK_CONCURRENCY,
    perAccount: config.PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY,
  }
}

/** The HTTP timeouts, from the configuration. */
export function httpTimeouts(config: Config): HttpTimeouts {
  return {
    headersMs: config.HTTP_HEADERS_TIMEOUT_MS,
    requestMs: config.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
  }
}

/** The caps on open connections, from the configuration. */
export function connectionLimits(config: Config): ConnectionLimits {
  return {
    max: config.HTTP_MAX_CONNECTIONS,
    perAddress: config.HTTP_MAX_CONNECTIONS_PER_ADDRESS,
    writeStallMs: config.HTTP_WRITE_STALL_TIMEOUT_MS,
  }
}

/** The bounds on rows of pages in progress, from the configuration. */
export function pageBudgetLimits(config: Config): PageBudgetLimits {
  return {
    perAccount: config.PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT,
    perProcess: config.PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS,
    sharePercent: config.PLANTSTORE_PAGE_SHARE_PERCENT,
  }
}

/** Turns the text of an integer or boolean setting into its value; anything else is left for validation to name. */
function fromText(schema: TSchema, value: unknown): unknown {
  if (typeof value !== 'string') return value
  if (schema.type === 'integer' && /^[0-9]{1,9}$/.test(value)) return Number(value)
  if (schema.type === 'boolean' && (value === 'true' || value === 'false')) return value === 'true'
  return value
}

/** PLANTSTORE_CORS_ORIGINS as a list; undefined when it is not set. */
export function corsOrigins(config: Config): string[] | undefined {
  return config.PLANTSTORE_CORS_ORIGINS?.split(',').map((origin) => origin.trim())
}

/**
 * An origin a browser can send: its own serialisation, so that one exact comparison finds it (a default port, port
 * 0 or beyond 65535, a malformed host or an IPv6 address written out in full would never match).
 */
function originValid(origin: string): boolean {
  try {
    const url = new URL(origin)
    return url.origin === origin && url.port !== '0'
  } catch {
    return false
  }
}

/** Fastify's trustProxy from the TRUST_PROXY setting: whose X-Forwarded-For gives the client address. */
export function trustProxy(setting: string): boolean | number | string {
  if (setting === 'true' || setting === 'false') return setting === 'true'
  return /^[0-9]+$/.test(setting) ? Number(setting) : setting
}

/** A TRUST_PROXY list entry: an IP address, optionally with a prefix length that fits it. */
function proxyEntryValid(entry: string): boolean {
  const [address = '', prefix, extra] = entry.trim().split('/')
  const version = isIP(address)
  if (version === 0 || extra !== undefined) return false
  return prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128))
}

/** The JWT settings go together: an issuer needs an audience, and neither URL may be fetched in the clear. */
function checkJwt(config: Config): void {
  const urls = ['PLANTSTORE_JWT_ISSUER', 'PLANTSTORE_JWT_JWKS_URL'] as const
  for (const key of urls) {
    const url = config[key]
    if (url !== undefined && !keyUrlAllowed(url)) {
      throw new ConfigError(`${key}: invalid value ${JSON.stringify(redactUrl(url))}; expected ${expectedValue(key)}`)
    }
  }
  if (config.PLANTSTORE_JWT_ISSUER === undefined) {
    const stray = (['PLANTSTORE_JWT_AUDIENCE', 'PLANTSTORE_JWT_JWKS_URL'] as const).find((key) => config[key])
    if (stray !== undefined) throw new ConfigError(`${stray}: set without PLANTSTORE_JWT_ISSUER, which turns JWTs on`)
  } else if (config.PLANTSTORE_BOOTSTRAP_TOKEN !== undefined && looksLikeJwt(config.PLANTSTORE_BOOTSTRAP_TOKEN)) {
    throw new ConfigError(
      'PLANTSTORE_BOOTSTRAP_TOKEN: (hidden) has the form of a JWT, so with PLANTSTORE_JWT_ISSUER set it would be read as a JWT; use one without two dots',
    )
  } else if (config.PLANTSTORE_JWT_AUDIENCE === undefined) {
    throw new ConfigError(
      'PLANTSTORE_JWT_AUDIENCE: required with PLANTSTORE_JWT_ISSUER (RFC 9068: the audience is checked)',
    )
  }
}

/** Rules across keys, after each key is valid on its own. */
function checked(config: Config): Config {
  const trust = trustProxy(config.TRUST_PROXY)
  if (typeof trust === 'string' && !trust.split(',').every(proxyEntryValid)) {
    throw new ConfigError(
      `TRUST_PROXY: invalid value ${JSON.stringify(trust)}; expected ${expectedValue('TRUST_PROXY')}`,
    )
  }
  const origins = corsOrigins(config)
  const unmatchable = origins?.find((origin) => !originValid(origin))
  if (unmatchable !== undefined) {
    throw new ConfigError(
      `PLANTSTORE_CORS_ORIGINS: ${JSON.stringify(unmatchable)} is not an origin as browsers send it (scheme, host, and the port only when it is not the scheme's default)`,
    )
  }
  checkJwt(config)
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `HTTP_HEADERS_TIMEOUT_MS: ${config.HTTP_HEADERS_TIMEOUT_MS} is above HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS})`,
    )
  }
  return config
}

/** Invalid configuration; the message starts with the key's name. */
export class ConfigError extends Error {}

/**
 * Reads configuration once: command-line overrides win over the environment,
 * which wins over defaults. Throws ConfigError naming the first bad key.
 */
export function loadConfig(env: NodeJS.ProcessEnv, overrides: Partial<Record<keyof Config, string>> = {}): Config {
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(ConfigSchema.properties)) {
    const value = overrides[key as keyof Config] ?? env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  for (const [key, value] of Object.entries(raw))
    raw[key] = fromText(ConfigSchema.properties[key as keyof Config], value)
  const config = Value.Default(ConfigSchema, raw)
  const error = Value.Errors(ConfigSchema, config).First()
  if (error === undefined) return checked(config as Config)
  const key = error.path.split('/')[1] as ConfigKey | undefined
  if (key === undefined) throw new ConfigError(`configuration: ${error.message}`)
  const shown = settingOf(key).secret === true ? '(hidden)' : JSON.stringify(redactUrl(String(raw[key])))
  throw new ConfigError(`${key}: invalid value ${shown}; expected ${expectedValue(key)}`)
}
