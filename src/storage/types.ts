/** A plant as stored: the account's id for it, its name and optional tag. */
export interface StoredPlant {
  id: bigint
  name: string
  tag: string | null
}

/** What creating a plant did: stored it, found the identical plant already there, or found a different one. */
export type CreateOutcome = 'created' | 'identical' | 'conflict'

/** One page request: up to `limit` plants with id greater than `after`, ascending. */
export interface PageRequest {
  limit: number
  after?: bigint
  tag?: string
}

/** A token as stored: never the secret, only its hash. */
export interface TokenRecord {
  id: string
  accountId: number
  accountName: string
  scopes: string[]
  label: string | null
  createdAt: Date
  expiresAt: Date | null
  revokedAt: Date | null
}

/** What it takes to store a new token; `secretHash` is the SHA-256 of the secret. */
export interface NewToken {
  id: string
  accountName: string
  secretHash: Buffer
  scopes: string[]
  label: string | null
  expiresAt: Date | null
}

/** The storage every backend implements; all methods are async so network databases fit. */
export interface Storage {
  /** Stores the plant unless the account already has that id. */
  createPlant(accountId: number, plant: StoredPlant): Promise<CreateOutcome>
  /** Plants of one account in ascending id order, one page. */
  listPlants(accountId: number, page: PageRequest): Promise<StoredPlant[]>
  /** Deletes one plant; false when the account has no such plant. */
  deletePlant(accountId: number, id: bigint): Promise<boolean>
  /** The token whose secret hashes to `secretHash`, whatever its state. */
  findToken(secretHash: Buffer): Promise<(TokenRecord & { secretHash: Buffer }) | undefined>
  /** Stores a token, creating its account when new. */
  createToken(token: NewToken): Promise<TokenRecord>
  /** Stores the token only if the store holds no token at all, atomically across processes; else undefined. */
  createFirstToken(token: NewToken): Promise<TokenRecord | undefined>
  /** All tokens, or one account's, oldest first. */
  listTokens(accountName?: string): Promise<TokenRecord[]>
  /** Marks a token revoked; false when no such token or already revoked. */
  revokeToken(id: string): Promise<boolean>
  /** How many tokens exist (any state); zero means a fresh store. */
  countTokens(): Promise<number>
  /** Resolves when the database answers. */
  ping(): Promise<void>
  /** Commits a write that touches no account's data; rejects when the database cannot take writes now. */
  probeWrite(): Promise<void>
  close(): Promise<void>
  /** Migration versions applied when this storage was opened (empty when the schema was already current). */
  readonly migrationsApplied: readonly number[]
}

/** How to open storage. */
export interface OpenOptions {
  /** Apply pending migrations (true), or refuse to open a database whose schema is behind (false). */
  migrate: boolean
  /** Most connections a network database's pool holds. */
  poolSize?: number
}

/** The database schema is older than this release and migrations are not to be applied on open. */
export class MigrationsPendingError extends Error {
  constructor(readonly pending: readonly number[]) {
    super(`the database schema lacks migration(s) ${pending.join(', ')}; run \`plantstore migrate\` first`)
    this.name = 'MigrationsPendingError'
  }
}
