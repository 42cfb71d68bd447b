import postgres from 'postgres'

/** The pool, with int8 read and written as bigint. */
export type Sql = postgres.Sql<{ bigint: bigint }>
/** A transaction on the pool. */
export type TransactionSql = postgres.TransactionSql<{ bigint: bigint }>
/** Either: what query helpers take. */
export type Query = Sql | TransactionSql

/** A lazily connecting pool of at most `poolSize` connections; other URL query parameters (search_path, sslmode, statement_timeout...) reach the server. */
export function connect(url: string, poolSize: number): Sql {
  return postgres(url, {
    max: poolSize,
    // Fail a request with 503 within seconds when the server is unreachable, instead of the 30 s default.
    connect_timeout: 5,
    types: { bigint: postgres.BigInt },
    // CREATE ... IF NOT EXISTS notices would otherwise go to console.log.
    onnotice: () => {},
    connection: { application_name: 'plantstore' },
  })
}
