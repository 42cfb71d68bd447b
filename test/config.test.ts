import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError, corsOrigins, DEFAULT_DATABASE_URL, jwtSettings, loadConfig } from '../src/config.js'

describe('configuration', () => {
  test('defaults to port 8080 on 127.0.0.1 with the SQLite file under ./data', () => {
    assert.deepEqual(loadConfig({}), {
      PORT: 8080,
      HOST: '127.0.0.1',
      WORKERS: 1,
      PLANTSTORE_RATE_LIMIT: '100/s',
      PLANTSTORE_AUTH_FAILURE_LIMIT: '20/min',
      PLANTSTORE_ACCOUNT_RATE_LIMIT: '500/s',
      TRUST_PROXY: 'false',
      DATABASE_URL: DEFAULT_DATABASE_URL,
      DATABASE_POOL_SIZE: 10,
      DATABASE_MIGRATE_ON_START: true,
      HTTP_HEADERS_TIMEOUT_MS: 10_000,
      HTTP_REQUEST_TIMEOUT_MS: 30_000,
      HTTP_KEEP_ALIVE_TIMEOUT_MS: 72_000,
      HTTP_MAX_CONNECTIONS: 10_000,
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: 256,
      HTTP_LISTEN_BACKLOG: 4096,
      HTTP_WRITE_STALL_TIMEOUT_MS: 30_000,
      PLANTSTORE_MAX_PAGE_ROWS_PER_ACCOUNT: 1000,
      PLANTSTORE_MAX_PAGE_ROWS_PER_PROCESS: 8000,
      SHUTDOWN_DRAIN_SECONDS: 0,
      SHUTDOWN_GRACE_SECONDS: 10,
      SHUTDOWN_TRACE_FLUSH_MS: 2000,
      LOG_LEVEL: 'info',
      PLANTSTORE_WEBHOOK_DELIVERY: true,
      PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: false,
      PLANTSTORE_WEBHOOK_TIMEOUT_MS: 10_000,
      PLANTSTORE_WEBHOOK_RETRY_BASE_MS: 5_000,
      PLANTSTORE_WEBHOOK_GIVE_UP_HOURS: 24,
      PLANTSTORE_WEBHOOK_FAILED_RETENTION_HOURS: 168,
      PLANTSTORE_WEBHOOK_CONCURRENCY: 16,
      PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: 4,
      PLANTSTORE_WEBHOOK_MAX_QUEUED: 10_000,
      PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: 10,
      PLANTSTORE_PAGE_SHARE_PERCENT: 50,
      PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: 1_000_000,
      PLANTSTORE_IDEMPOTENCY_KEY_HOURS: 24,
      PLANTSTORE_MAX_IDEMPOTENCY_KEYS_PER_ACCOUNT: 1_000_000,
      PLANTSTORE_MAX_TOKENS_PER_ACCOUNT: 100,
      PLANTSTORE_JWT_ACCOUNT_CLAIM: 'sub',
      PLANTSTORE_JWT_ALGORITHMS: 'RS256,ES256,EdDSA',
      PLANTSTORE_JWT_CLOCK_TOLERANCE: 30,
    })
    assert.equal(DEFAULT_DATABASE_URL, 'sqlite:./data/plantstore.db')
  })

  test('reads the environment, and flags override it', () => {
    const env = { PORT: '9000', HOST: '0.0.0.0', DATABASE_URL: 'sqlite:/tmp/x.db', LOG_LEVEL: 'warn' }
    assert.equal(loadConfig(env).PORT, 9000)
    const config = loadConfig(env, { PORT: '9001', DATABASE_URL: 'sqlite:/tmp/y.db' })
    assert.equal(config.PORT, 9001)
    assert.equal(config.DATABASE_URL, 'sqlite:/tmp/y.db')
    assert.equal(config.HOST, '0.0.0.0')
    assert.equal(config.LOG_LEVEL, 'warn')
  })

  test('accepts PostgreSQL URLs, a pool size and turning start-up migrations off', () => {
    for (const url of ['postgres://app:pw@db:5432/plants', 'postgresql://db/plants?sslmode=require']) {
      assert.equal(loadConfig({ DATABASE_URL: url }).DATABASE_URL, url)
    }
    const config = loadConfig({ DATABASE_POOL_SIZE: '25', DATABASE_MIGRATE_ON_START: 'false' })
    assert.equal(config.DATABASE_POOL_SIZE, 25)
    assert.equal(config.DATABASE_MIGRATE_ON_START, false)
  })

  test('reads CORS origins as a list, with or without spaces after the commas; none by default', () => {
    assert.equal(corsOrigins(loadConfig({})), undefined)
    const origins = 'https://app.example.com, http://localhost:5173,http://127.0.0.1:8081,http://[::1]:3000'
    assert.deepEqual(corsOrigins(loadConfig({ PLANTSTORE_CORS_ORIGINS: origins })), [
      'https://app.example.com',
      'http://localhost:5173',
      'http://127.0.0.1:8081',
      'http://[::1]:3000',
    ])
  })

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    [
      'no subscriptions allowed at all',
      { PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: '0' },
      /^PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT: .*1 to 10000/,
    ],
    ['a queue cap of 0', { PLANTSTORE_WEBHOOK_MAX_QUEUED: '0' }, /^PLANTSTORE_WEBHOOK_MAX_QUEUED: .*1 to 10000000/],
    [
      'a negative plant quota',
      { PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: '-1' },
      /^PLANTSTORE_MAX_PLANTS_PER_ACCOUNT: .*0 for no limit/,
    ],
    [
      'no attempt in flight per account',
      { PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: '0' },
      /^PLANTSTORE_WEBHOOK_ACCOUNT_CONCURRENCY: /,
    ],
    [
      'a give-up period over 30 days',
      { PLANTSTORE_WEBHOOK_GIVE_UP_HOURS: '721' },
      /^PLANTSTORE_WEBHOOK_GIVE_UP_HOURS: .*1 to 720/,
    ],
    ['a port above 65535', { PORT: '99999' }, /^PORT: invalid value "99999"/],
    ['a port that is not a number', { PORT: 'eighty' }, /^PORT: /],
    ['an unknown log level', { LOG_LEVEL: 'loud' }, /^LOG_LEVEL: .*one of fatal/],
    ['a database URL of an unknown kind', { DATABASE_URL: 'mysql://x' }, /^DATABASE_URL: /],
    [
      'a grace period that is not a whole number of seconds',
      { SHUTDOWN_GRACE_SECONDS: '1.5' },
      /^SHUTDOWN_GRACE_SECONDS: /,
    ],
    ['a drain period over an hour', { SHUTDOWN_DRAIN_SECONDS: '3601' }, /^SHUTDOWN_DRAIN_SECONDS: .*0 to 3600/],
    [
      'a headers timeout below 100 ms',
      { HTTP_HEADERS_TIMEOUT_MS: '50' },
      /^HTTP_HEADERS_TIMEOUT_MS: .*100 to 3600000 \(milliseconds\), at most HTTP_REQUEST_TIMEOUT_MS$/,
    ],
    [
      'a headers timeout above the request timeout',
      { HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' },
      /^HTTP_HEADERS_TIMEOUT_MS: 20000 is above HTTP_REQUEST_TIMEOUT_MS \(10000\)/,
    ],
    [
      'a keep-alive timeout that is not a number',
      { HTTP_KEEP_ALIVE_TIMEOUT_MS: '5s' },
      /^HTTP_KEEP_ALIVE_TIMEOUT_MS: /,
    ],
    ['no connections at all', { HTTP_MAX_CONNECTIONS: '0' }, /^HTTP_MAX_CONNECTIONS: .*1 to 1000000/],
    [
      'a stall timeout below 100 ms',
      { HTTP_WRITE_STALL_TIMEOUT_MS: '10' },
      /^HTTP_WRITE_STALL_TIMEOUT_MS: .*100 to 3600000/,
    ],
    [
      'a per-address connection cap that is not a number',
      { HTTP_MAX_CONNECTIONS_PER_ADDRESS: 'many' },
      /^HTTP_MAX_CONNECTIONS_PER_ADDRESS: .*1 to 1000000/,
    ],
    [
      'a metrics token that is too short',
      { PLANTSTORE_METRICS_TOKEN: 'short' },
      /^PLANTSTORE_METRICS_TOKEN: invalid value \(hidden\)/,
    ],
    ['a rate limit without a unit', { PLANTSTORE_RATE_LIMIT: '600' }, /^PLANTSTORE_RATE_LIMIT: .*100\/s, 6000\/min/],
    ['a failure limit per day', { PLANTSTORE_AUTH_FAILURE_LIMIT: '5/day' }, /^PLANTSTORE_AUTH_FAILURE_LIMIT: /],
    ['a Redis URL of another scheme', { REDIS_URL: 'http://cache:6379' }, /^REDIS_URL: /],
    ['a trusted proxy list with a bad prefix', { TRUST_PROXY: '10.0.0.0/99' }, /^TRUST_PROXY: /],
    [
      'a CORS origin with a path',
      { PLANTSTORE_CORS_ORIGINS: 'https://app.example.com/' },
      /^PLANTSTORE_CORS_ORIGINS: /,
    ],
    ['a CORS wildcard', { PLANTSTORE_CORS_ORIGINS: '*' }, /^PLANTSTORE_CORS_ORIGINS: .*comma-separated origins/],
    ['a CORS origin in capitals', { PLANTSTORE_CORS_ORIGINS: 'https://App.example.com' }, /^PLANTSTORE_CORS_ORIGINS: /],
    ['a CORS origin without a scheme', { PLANTSTORE_CORS_ORIGINS: 'app.example.com' }, /^PLANTSTORE_CORS_ORIGINS: /],
    [
      'a CORS origin with its default port, which browsers leave out',
      { PLANTSTORE_CORS_ORIGINS: 'http://localhost:3000,https://app.example.com:443' },
      /^PLANTSTORE_CORS_ORIGINS: "https:\/\/app.example.com:443" is not an origin as browsers send it/,
    ],
    ['a CORS origin on port 0', { PLANTSTORE_CORS_ORIGINS: 'http://a.example:0' }, /^PLANTSTORE_CORS_ORIGINS: /],
    [
      'a CORS origin beyond port 65535',
      { PLANTSTORE_CORS_ORIGINS: 'http://a.example:99999' },
      /^PLANTSTORE_CORS_ORIGINS: /,
    ],
    ['a CORS origin with a malformed host', { PLANTSTORE_CORS_ORIGINS: 'http://[::::]' }, /^PLANTSTORE_CORS_ORIGINS: /],
    [
      'a CORS origin with an IPv6 address written out in full',
      { PLANTSTORE_CORS_ORIGINS: 'http://[0:0:0:0:0:0:0:1]:8080' },
      /^PLANTSTORE_CORS_ORIGINS: /,
    ],
    ['a trusted proxy list of numbers', { TRUST_PROXY: '1,2' }, /^TRUST_PROXY: /],
    ['a trusted proxy that is not an address', { TRUST_PROXY: 'everyone' }, /^TRUST_PROXY: /],
    ['zero workers', { WORKERS: '0' }, /^WORKERS: .*1 to 256/],
    ['a pool size of zero', { DATABASE_POOL_SIZE: '0' }, /^DATABASE_POOL_SIZE: .*1 to 1000/],
    ['a pool size that is not a number', { DATABASE_POOL_SIZE: 'ten' }, /^DATABASE_POOL_SIZE: /],
    [
      'a migrate switch that is not true or false',
      { DATABASE_MIGRATE_ON_START: 'yes' },
      /^DATABASE_MIGRATE_ON_START: .*true or false/,
    ],
    ['a bootstrap token that is too short', { PLANTSTORE_BOOTSTRAP_TOKEN: 'short' }, /^PLANTSTORE_BOOTSTRAP_TOKEN: /],
    [
      'a webhook private-address switch that is not true or false',
      { PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'yes' },
      /^PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: .*true or false/,
    ],
    ['a webhook timeout under 100 ms', { PLANTSTORE_WEBHOOK_TIMEOUT_MS: '10' }, /^PLANTSTORE_WEBHOOK_TIMEOUT_MS: /],
    [
      'a webhook retry base that is not a number',
      { PLANTSTORE_WEBHOOK_RETRY_BASE_MS: 'x' },
      /^PLANTSTORE_WEBHOOK_RETRY_BASE_MS: /,
    ],
    [
      'a webhook delivery switch that is not true or false',
      { PLANTSTORE_WEBHOOK_DELIVERY: '1' },
      /^PLANTSTORE_WEBHOOK_DELIVERY: /,
    ],
    [
      'a token quota of 0',
      { PLANTSTORE_MAX_TOKENS_PER_ACCOUNT: '0' },
      /^PLANTSTORE_MAX_TOKENS_PER_ACCOUNT: .*1 to 10000/,
    ],
    [
      'a JWT issuer without an audience',
      { PLANTSTORE_JWT_ISSUER: 'https://id.example.com' },
      /^PLANTSTORE_JWT_AUDIENCE: required with PLANTSTORE_JWT_ISSUER/,
    ],
    [
      'a JWT audience without an issuer',
      { PLANTSTORE_JWT_AUDIENCE: 'https://plants.example.com' },
      /^PLANTSTORE_JWT_AUDIENCE: set without PLANTSTORE_JWT_ISSUER/,
    ],
    [
      'a JWT issuer over plain http to a remote host',
      { PLANTSTORE_JWT_ISSUER: 'http://id.example.com', PLANTSTORE_JWT_AUDIENCE: 'api' },
      /^PLANTSTORE_JWT_ISSUER: .*https:\/\/ URL \(http:\/\/ for a loopback host only\)/,
    ],
    [
      'a JWKS URL over plain http to a remote host',
      {
        PLANTSTORE_JWT_ISSUER: 'https://id.example.com',
        PLANTSTORE_JWT_AUDIENCE: 'api',
        PLANTSTORE_JWT_JWKS_URL: 'http://10.0.0.1/jwks',
      },
      /^PLANTSTORE_JWT_JWKS_URL: /,
    ],
    [
      'a JWT issuer over plain http to a name that starts like a loopback address',
      { PLANTSTORE_JWT_ISSUER: 'http://127.evil.example', PLANTSTORE_JWT_AUDIENCE: 'api' },
      /^PLANTSTORE_JWT_ISSUER: /,
    ],
    [
      'a bootstrap token that looks like a JWT while JWTs are on',
      {
        PLANTSTORE_JWT_ISSUER: 'https://id.example.com',
        PLANTSTORE_JWT_AUDIENCE: 'api',
        PLANTSTORE_BOOTSTRAP_TOKEN: 'abcdefghijklmnop.qrstuvwxyz012345.6789',
      },
      /^PLANTSTORE_BOOTSTRAP_TOKEN: .*would be read as a JWT/,
    ],
    ['a JWT issuer that is not a URL', { PLANTSTORE_JWT_ISSUER: 'id.example.com' }, /^PLANTSTORE_JWT_ISSUER: /],
    [
      'JWT algorithm none',
      { PLANTSTORE_JWT_ALGORITHMS: 'RS256,none' },
      /^PLANTSTORE_JWT_ALGORITHMS: .*never none or HMAC/,
    ],
    ['JWT algorithm HS256', { PLANTSTORE_JWT_ALGORITHMS: 'HS256' }, /^PLANTSTORE_JWT_ALGORITHMS: /],
    [
      'a JWT account claim with a space',
      { PLANTSTORE_JWT_ACCOUNT_CLAIM: 'my claim' },
      /^PLANTSTORE_JWT_ACCOUNT_CLAIM: /,
    ],
    [
      'a JWT clock tolerance over 5 minutes',
      { PLANTSTORE_JWT_CLOCK_TOLERANCE: '301' },
      /^PLANTSTORE_JWT_CLOCK_TOLERANCE: .*0 to 300/,
    ],
  ]
  for (const [what, env, message] of bad) {
    test(`fails fast on ${what}, naming the key`, () => {
      assert.throws(
        () => loadConfig(env),
        (err: unknown) => err instanceof ConfigError && message.test(err.message),
      )
    })
  }

  test('turns JWTs on with an issuer and an audience, with the defaults of the rest', () => {
    const config = loadConfig({
      PLANTSTORE_JWT_ISSUER: 'https://id.example.com/realms/plants',
      PLANTSTORE_JWT_AUDIENCE: 'plantstore',
    })
    assert.deepEqual(jwtSettings(config), {
      issuer: 'https://id.example.com/realms/plants',
      audience: 'plantstore',
      jwksUrl: undefined,
      accountClaim: 'sub',
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      clockToleranceSeconds: 30,
    })
    assert.equal(jwtSettings(loadConfig({})), undefined)
    const local = loadConfig({ PLANTSTORE_JWT_ISSUER: 'http://127.0.0.1:8081', PLANTSTORE_JWT_AUDIENCE: 'x' })
    assert.equal(jwtSettings(local)?.issuer, 'http://127.0.0.1:8081', 'plain http to a loopback provider')
  })

  test('never echoes the password of a rejected database URL', () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'mysql://admin:hunter2@db.example/plants' }),
      (err: Error) => !err.message.includes('hunter2') && err.message.includes('mysql://admin:***@db.example'),
    )
  })

  test('never echoes a rejected bootstrap token', () => {
    assert.throws(
      () => loadConfig({ PLANTSTORE_BOOTSTRAP_TOKEN: 'not a token!' }),
      (err: Error) => !err.message.includes('not a token!') && err.message.includes('(hidden)'),
    )
  })
})
