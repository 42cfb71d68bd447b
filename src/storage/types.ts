import type { EventType } from '../webhooks/events.js'

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

/** Where an account's webhook events go. The signing secret is never part of it. */
export interface Subscription {
  id: string
  accountId: number
  accountName: string
  url: string
  eventTypes: EventType[]
  createdAt: Date
}

/** What it takes to store a subscription; its account is created when new. */
export interface NewSubscription {
  id: string
  accountName: string
  url: string
  /** The Standard Webhooks signing secret (`whsec_...`): kept as is, since signing needs it. */
  secret: string
  eventTypes: EventType[]
}

/** One event on its way to one subscription, claimed for one attempt under `lease`. */
export interface ClaimedDelivery {
  id: string
  lease: string
  eventId: string
  eventType: EventType
  body: string
  url: string
  secret: string
  subscriptionId: string
  /** Attempts made before this one. */
  attempts: number
  /** When the event was written. */
  createdAt: Date
  /** When it was first claimed (this claim, for a first attempt): retries are counted from there. */
  firstAttemptAt: Date
}

/** How an attempt ended: delivered (the row goes), retry at `nextAttemptAt`, or failed for good. */
export type DeliveryOutcome =
  | { state: 'delivered' }
  | { state: 'retry'; nextAttemptAt: Date; status: number | null; error: string }
  | { state: 'failed'; status: number | null; error: string }

/** The storage every backend implements; all methods are async so network databases fit. */
export interface Storage {
  /** Stores the plant unless the account already has that id; with it, in one transaction, its plant.created events. */
  createPlant(accountId: number, plant: StoredPlant): Promise<CreateOutcome>
  /** Plants of one account in ascending id order, one page. */
  listPlants(accountId: number, page: PageRequest): Promise<StoredPlant[]>
  /** Deletes one plant and queues its plant.deleted events, atomically; false when the account has no such plant. */
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
  /** Stores a webhook subscription, creating its account when new. */
  createSubscription(subscription: NewSubscription): Promise<Subscription>
  /** Subscriptions, all or one account's (by id or name), oldest first. */
  listSubscriptions(filter?: { accountId?: number; accountName?: string }): Promise<Subscription[]>
  /** Removes a subscription (within `accountId` when given) and its undelivered events; false when none. */
  deleteSubscription(id: string, accountId?: number): Promise<boolean>
  /**
   * Claims up to `limit` due deliveries, at most one per subscription (its oldest, to keep its order), each for
   * `leaseMs`: no other claim gets it meanwhile, and one that is never finished is due again after the lease.
   */
  claimDeliveries(limit: number, leaseMs: number): Promise<ClaimedDelivery[]>
  /** Records how a claimed attempt ended; ignored when the lease is no longer this claim's. */
  finishDelivery(delivery: Pick<ClaimedDelivery, 'id' | 'lease'>, outcome: DeliveryOutcome): Promise<void>
  /** Deliveries still to be made (pending, claimed or not). */
  countPendingDeliveries(): Promise<number>
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
