// Apart from serve.ts, so that printing it, or running any other command, never loads the HTTP stack.
export const SERVE_HELP = `Usage: plantstore serve [--port 8080] [--host 127.0.0.1] [--database URL] [--workers N]

Runs the HTTP service. Flags override the environment:
  --port N         PORT          port to listen on (default 8080; 0 picks a free one)
  --host ADDR      HOST          address to listen on (default 127.0.0.1)
  --workers N      WORKERS       server processes sharing the port (default 1; e.g. $(nproc) to use every core)
  --database URL   DATABASE_URL  storage: sqlite:<file> (default sqlite:./data/plantstore.db)
                                 or postgres://user:password@host:5432/database
                   DATABASE_POOL_SIZE  PostgreSQL connections per process (default 10)
                   DATABASE_MIGRATE_ON_START  true (default) or false: then run plantstore migrate first
                   LOG_LEVEL     fatal|error|warn|info|debug|trace|silent (default info)
                   HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, HTTP_KEEP_ALIVE_TIMEOUT_MS  (README)
                   HTTP_MAX_CONNECTIONS  open connections per process (default 10000), then 503
                   HTTP_MAX_CONNECTIONS_PER_ADDRESS  per client address (default 256; not for TRUST_PROXY
                                 proxies), then 429
                   HTTP_WRITE_STALL_TIMEOUT_MS  close a connection whose answers sit unread, not moving,
                                 this long (default 30000)
                   SHUTDOWN_DRAIN_SECONDS  on SIGTERM, seconds of /readyz 503 before closing (default 0)
                   SHUTDOWN_GRACE_SECONDS  then seconds for requests in flight to finish (default 10)
                   PLANTSTORE_RATE_LIMIT  per token, e.g. 600/min (default), 0 for none
                   PLANTSTORE_AUTH_FAILURE_LIMIT  failed authentications per address (default 20/min)
                   REDIS_URL     share rate limits across instances
                   TRUST_PROXY   proxies whose X-Forwarded-For names the client (default false)
                   PLANTSTORE_METRICS_TOKEN    when set, GET /metrics needs it as a bearer token
                   PLANTSTORE_BOOTSTRAP_TOKEN  the first token of an empty store
                   PLANTSTORE_MAX_PLANTS_PER_ACCOUNT  plants per account (default 1000000; 0 for none), then 409
                   PLANTSTORE_MAX_WEBHOOKS_PER_ACCOUNT  webhook subscriptions per account (default 10), then 409
                   PLANTSTORE_WEBHOOK_MAX_QUEUED  undelivered events per subscription (default 10000); a
                                 change finding it full disables the subscription
                   PLANTSTORE_WEBHOOK_DELIVERY, _ALLOW_PRIVATE, _TIMEOUT_MS, _RETRY_BASE_MS, _GIVE_UP_HOURS,
                   _FAILED_RETENTION_HOURS, _CONCURRENCY, _ACCOUNT_CONCURRENCY  webhook delivery (README)`
