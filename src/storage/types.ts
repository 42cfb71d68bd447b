/*
 * The storage every backend implements, in four parts by concern (plants, tokens, webhooks, health), and the values
 * they take and return. Storage knows nothing of HTTP, authentication or what events mean: an event is an opaque
 * id, type and body that the caller built.
 */

// Plants

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
  /** What each item holds beside its name: the id, the tag (of plants that have one). */
  fields: { id: boolean; tag: boolean }
}

/**
 * One page as the API answers it, written by the database: the client's decoding of a row per plant, and the
 * serialising of them again, cost more than the query.
 */
export interface PlantPage {
  /**
   * The items as a JSON array text, in ascending id order: objects with "name", then "id" (a JSON integer, exact)
   * and "tag" as `fields` asks, without insignificant white space, strings escaped as JSON.stringify does.
   */
  json: string
  /** The id of the page's last plant; undefined for an empty page. */
  lastId: bigint | undefined
  /** Whether the account holds more plants matching the request after `lastId`. */
  more: boolean
}

/**
 * An event a change emits, built by the caller: written in the change's transaction for every active subscription
 * of the account that wants its `type`, and only if the change happened.
 */
export interface OutboxEvent {
  id: string
  type: string
  body: string
}

/**
 * Builds the event of a change to `subject` (a new plant, a deleted id). A backend may call it before it knows
 * whether the change happens (PostgreSQL writes change and event in one statement); it writes the event only if so.
 */
export type EventOf<T> = (subject: T) => OutboxEvent

export interface PlantStore {
  /**
   * Stores the plant unless the account already has that id; with it, in one transaction, `event` for the
   * account's subscriptions. QuotaExceededError when the account holds its quota of plants.
   */
  create(accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>): Promise<CreateOutcome>
  /** Plants of one account in ascending id order, one page. */
  list(accountId: number, page: PageRequest): Promise<PlantPage>
  /** Deletes one plant and queues its `event`, atomically; false (and no event) when the account has no such plant. */
  delete(accountId: number, id: bigint, event: EventOf<bigint>): Promise<boolean>
}

// Tokens

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

/** A token with the hash of its secret, as authentication reads it. */
export type StoredToken = TokenRecord & { secretHash: Buffer }

/** What it takes to store a new token; `secretHash` is the SHA-256 of the secret. */
export interface NewToken {
  id: string
  accountName: string
  secretHash: Buffer
  scopes: string[]
  label: string | null
  expiresAt: Date | null
}

export interface TokenStore {
  /** The token whose secret hashes to `secretHash`, whatever its state. */
  find(secretHash: Buffer): Promise<StoredToken | undefined>
  /**
   * Stores a token, creating its account when new. With `quota` (above 0), only while the account holds fewer tokens
   * not revoked (expired ones count until removed), else QuotaExceededError; exact, also under concurrent creates.
   */
  create(token: NewToken, quota?: number): Promise<TokenRecord>
  /** Stores the token only if the store holds no token at all, atomically across processes; else undefined. */
  createFirst(token: NewToken): Promise<TokenRecord | undefined>
  /** All tokens, or one account's, oldest first. */
  list(accountName?: string): Promise<TokenRecord[]>
  /** Marks a token revoked; false when no such token or already revoked. */
  revoke(id: string): Promise<boolean>
  /** Deletes one of account `accountId`'s tokens, whatever its state; false when it has no such token. */
  remove(id: string, accountId: number): Promise<boolean>
  /** The id of the account called `name`, created when new. */
  accountId(name: string): Promise<number>
  /** How many tokens exist (any state); zero means a fresh store. */
  count(): Promise<number>
}

// Webhooks

/** Why a subscription was disabled: it kept failing for the give-up period, or its queue reached its cap. */
export type DisabledReason = 'failing' | 'backlog'

/** Where an account's webhook events go. The signing secret is never part of it. */
export interface Subscription {
  id: string
  accountId: number
  accountName: string
  url: string
  eventTypes: string[]
  createdAt: Date
  /** Disabled: no events are queued for it nor attempted until it is enabled again. */
  state: 'active' | 'disabled'
  disabledReason: DisabledReason | null
  disabledAt: Date | null
  /** Deliveries waiting to be made. */
  queued: number
  /** Since when its attempts have failed without a success in between; null while it succeeds. */
  failingSince: Date | null
}

/** What it takes to store a subscription; its account is created when new. */
export interface NewSubscription {
  id: string
  accountName: string
  url: string
  /** The Standard Webhooks signing secret (`whsec_...`): kept as is, since signing needs it. */
  secret: string
  eventTypes: string[]
}

/** Which subscriptions to list: all, or one account's (by id or name). */
export interface SubscriptionFilter {
  accountId?: number
  accountName?: string
}

/** One event on its way to one subscription, claimed for one attempt under `lease`. */
export interface ClaimedDelivery {
  id: string
  lease: string
  eventId: string
  eventType: string
  body: string
  url: string
  secret: string
  subscriptionId: string
  /** Attempts made before this one. */
  attempts: number
  /** When the event was written. */
  createdAt: Date
  /** When it was first claimed (this claim, for a first attempt). */
  firstAttemptAt: Date
  /** Failed attempts of its subscription since its last success (the backoff grows with them). */
  failures: number
  /** Since when its subscription has failed without a success; null when its last attempt succeeded. */
  failingSince: Date | null
}

/** What recording an attempt needs of its claimed delivery. */
export type DeliveryRef = Pick<ClaimedDelivery, 'id' | 'lease' | 'subscriptionId' | 'eventId' | 'eventType'>

/** What one attempt met: when it started, how long it took, the receiver's status and, unless 2xx, why it failed. */
export interface AttemptReport {
  startedAt: Date
  durationMs: number
  status: number | null
  error: string | null
}

/**
 * How an attempt ended: delivered (the row goes); retry, the subscription waiting until `nextAttemptAt`; or failed,
 * the subscription given up on: disabled, its queued deliveries to be failed (settleDisabled).
 */
export type DeliveryOutcome = AttemptReport &
  ({ state: 'delivered' } | { state: 'retry'; nextAttemptAt: Date } | { state: 'failed' })

/** Attempts kept per subscription for `webhooks deliveries`: a ring, so the history costs the same at any traffic. */
export const ATTEMPTS_KEPT = 20

/** One recorded attempt of a subscription, as `webhooks deliveries` shows it. */
export interface AttemptRecord extends AttemptReport {
  eventId: string
  eventType: string
  outcome: DeliveryOutcome['state']
}

/** A delivery given up on: its subscription was disabled while it waited. */
export interface FailedDelivery {
  eventId: string
  eventType: string
  createdAt: Date
  failedAt: Date
  attempts: number
  lastStatus: number | null
  lastError: string | null
}

/** A subscription's recent attempts (newest first) and its failed deliveries (newest first). */
export interface DeliveryHistory {
  attempts: AttemptRecord[]
  failed: FailedDelivery[]
}

export interface WebhookStore {
  /** Stores a webhook subscription, creating its account when new; QuotaExceededError at the account's quota. */
  createSubscription(subscription: NewSubscription): Promise<Subscription>
  /** Subscriptions, all or one account's, oldest first. */
  listSubscriptions(filter?: SubscriptionFilter): Promise<Subscription[]>
  /** Removes a subscription (within `accountId` when given) with its deliveries and attempts; false when none. */
  deleteSubscription(id: string, accountId?: number): Promise<boolean>
  /**
   * Enables a disabled subscription again (within `accountId` when given), its failures forgotten and what it held
   * before failed first; undefined when none.
   */
  enableSubscription(id: string, accountId?: number): Promise<Subscription | undefined>
  /**
   * Claims the next attempt of up to `limit` active subscriptions whose backoff is over, each for `leaseMs`: the
   * oldest queued delivery of each (to keep its order; one in flight per subscription). Work is bounded by `limit`,
   * whatever is queued. Fair between accounts: at most `perAccount` subscriptions of one account leased at once
   * (across instances), and accounts holding fewer leases go first.
   */
  claimDeliveries(limit: number, leaseMs: number, perAccount: number): Promise<ClaimedDelivery[]>
  /** Records how a claimed attempt ended; ignored when the subscription's lease is no longer this claim's. */
  finishDelivery(delivery: DeliveryRef, outcome: DeliveryOutcome): Promise<void>
  /**
   * Fails up to `limit` deliveries still queued for one disabled subscription, and deletes up to `limit` failed
   * deliveries of its earlier disabling; resolves with how many rows changed (0: nothing left to settle anywhere).
   * Disabling only marks a subscription: its queue is failed by these calls, in short transactions, afterwards.
   */
  settleDisabled(limit: number): Promise<number>
  /** Deletes up to `limit` deliveries that failed before `before`; resolves with how many went. */
  purgeFailedDeliveries(before: Date, limit: number): Promise<number>
  /** A subscription's last ATTEMPTS_KEPT attempts and its failed deliveries (at most `limit`). */
  deliveryHistory(subscriptionId: string, limit: number): Promise<DeliveryHistory>
  /** Deliveries still to be made, over every active subscription. */
  countPendingDeliveries(): Promise<number>
}

// Health

export interface HealthCheck {
  /** Resolves when the database answers. */
  ping(): Promise<void>
  /** Commits a write that touches no account's data; rejects when the database cannot take writes now. */
  probeWrite(): Promise<void>
}

// The whole

/**
 * Per-account quotas the storage enforces in the transaction of the write (0: none). The database is the source of
 * truth, so they hold across instances.
 */
export interface StorageLimits {
  /** Plants per account. */
  plantsPerAccount: number
  /** Webhook subscriptions per account. */
  subscriptionsPerAccount: number
  /** Deliveries queued per subscription; an event finding its subscription at the cap disables it instead. */
  queuedPerSubscription: number
}

/** No quota at all: what storage opened without limits enforces. */
export const NO_LIMITS: StorageLimits = { plantsPerAccount: 0, subscriptionsPerAccount: 0, queuedPerSubscription: 0 }

/** The database cannot be reached or written now: try again later (the API answers 503). */
export class StorageUnavailableError extends Error {
  constructor(cause: unknown) {
    super('storage unavailable', { cause })
    this.name = 'StorageUnavailableError'
  }
}

/** A DATABASE_URL that names no backend this release has. */
export class UnsupportedDatabaseUrlError extends Error {
  constructor(readonly url: string) {
    super('unsupported database URL (expected sqlite:<path> or postgres://...)')
    this.name = 'UnsupportedDatabaseUrlError'
  }
}

/** A create refused because the account holds its quota of `resource`. */
export class QuotaExceededError extends Error {
  constructor(
    readonly resource: 'plants' | 'subscriptions' | 'tokens',
    readonly limit: number,
  ) {
    super(`the account holds its quota of ${limit} ${resource}`)
    this.name = 'QuotaExceededError'
  }
}

/** A backend: its four parts over one database. All methods are async so network databases fit. */
export interface Storage {
  readonly plants: PlantStore
  readonly tokens: TokenStore
  readonly webhooks: WebhookStore
  readonly health: HealthCheck
  /** Migration versions applied when this storage was opened (empty when the schema was already current). */
  readonly migrationsApplied: readonly number[]
  close(): Promise<void>
}

/** How to open storage. */
export interface OpenOptions {
  /** Apply pending migrations (true), or refuse to open a database whose schema is behind (false). */
  migrate: boolean
  /** Most connections a network database's pool holds. */
  poolSize?: number
  /** Per-account quotas; none when not given. */
  limits?: StorageLimits
}

/** The database schema is older than this release and migrations are not to be applied on open. */
export class MigrationsPendingError extends Error {
  constructor(readonly pending: readonly number[]) {
    super(`the database schema lacks migration(s) ${pending.join(', ')}; run \`plantstore migrate\` first`)
    this.name = 'MigrationsPendingError'
  }
}
