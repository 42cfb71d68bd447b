/*
 * The storage every backend implements, in five parts by concern (plants, tokens, webhooks, idempotency keys, health), and the values
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
  /** The W3C `traceparent` of the change that made it, when traced: its deliveries continue that trace. */
  traceparent?: string
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
  /** The account's plant with that id; undefined when it has none (another account's plant included). */
  get(accountId: number, id: bigint): Promise<StoredPlant | undefined>
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
  /** The id of the token that made it (POST /tokens); null for one made otherwise (the CLI, a first start, a JWT). */
  createdBy: string | null
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
  /** The token making it, as TokenRecord's; null when none did. */
  createdBy: string | null
}

/** A token not stored because the token making it (`createdBy`) is revoked or gone. */
export class MakerEndedError extends Error {
  constructor(readonly makerId: string) {
    super(`the token making it, ${makerId}, is revoked or deleted`)
    this.name = 'MakerEndedError'
  }
}

/**
 * How many makers up from a token `find` walks. A token further from a token made otherwise (the CLI, a first
 * start, a JWT) cannot be judged, so it is refused as revoked: the bound keeps a lookup's cost fixed.
 */
export const LINEAGE_DEPTH = 32

export interface TokenStore {
  /**
   * The token whose secret hashes to `secretHash`, whatever its state, as authentication must judge it: with its
   * lineage (its maker, the maker's maker, ...) folded in. It counts as revoked when it or any token of its lineage
   * is revoked (the earliest such time), or when one of them is gone (deleted: the time of this lookup) or lies
   * beyond LINEAGE_DEPTH; it expires when the first of them expires. So revoking, deleting or expiring a token ends
   * every token it made, transitively, whatever was made meanwhile.
   */
  find(secretHash: Buffer): Promise<StoredToken | undefined>
  /**
   * Stores a token, creating its account when new. With `quota` (above 0), only while the account holds fewer tokens
   * not revoked (expired ones count until removed), else QuotaExceededError; exact, also under concurrent creates.
   * With `createdBy`, only while that token exists and is not revoked, else MakerEndedError: a maker still trusted
   * from cache just after its revocation makes nothing that would be listed as live.
   */
  create(token: NewToken, quota?: number): Promise<TokenRecord>
  /** Stores the token only if the store holds no token at all, atomically across processes; else undefined. */
  createFirst(token: NewToken): Promise<TokenRecord | undefined>
  /** All tokens, or one account's, oldest first. */
  list(accountName?: string): Promise<TokenRecord[]>
  /**
   * Marks a token revoked, and every token it made (transitively) with it; false when no such token or it was
   * already revoked. The descendants are marked so that listings and quotas show them ended: find refuses them
   * anyway, even one made while this ran.
   */
  revoke(id: string): Promise<boolean>
  /**
   * Deletes one of account `accountId`'s tokens, whatever its state, and marks every token it made (transitively)
   * revoked, keeping their rows (and their maker's id) for the record; false when it has no such token.
   */
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
  /** The `traceparent` its event was written with; null when its change was not traced. */
  traceparent: string | null
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
/**
 * How an attempt ended: delivered; to be retried (a failure, counted towards its subscription's backoff and give-up
 * period); deferred (cut short to make room for another account: tried again at `nextAttemptAt`, nothing counted
 * against the receiver); or failed (given up on).
 */
export type DeliveryOutcome = AttemptReport &
  (
    | { state: 'delivered' }
    | { state: 'retry'; nextAttemptAt: Date }
    | { state: 'deferred'; nextAttemptAt: Date }
    | { state: 'failed' }
  )

/** Attempts kept per subscription for `webhooks deliveries`: a ring, so the history costs the same at any traffic. */
export const ATTEMPTS_KEPT = 20

/**
 * Queued deliveries of a disabled subscription failed per transaction. Disabling only marks the subscription; its
 * queue (up to the cap, for every subscription of an account at once) is failed in batches this size afterwards,
 * so no one change holds the write lock, or SQLite's event loop, for long.
 */
export const SETTLE_BATCH = 500

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

// Idempotency keys

/** A request's claim on an Idempotency-Key of its account: the key, a fingerprint of the request, and for how long. */
export interface KeyClaim {
  accountId: number
  /** The key as the client sent it (its quotes removed). */
  key: string
  /** A digest of what the request asks (operation, caller, body): the same key with another request is refused. */
  fingerprint: Buffer
  /** Names this claim: only its holder may complete or release it. */
  lease: string
  /** How long the kept answer is replayed before the key is forgotten. */
  ttlMs: number
  /** How long the claim holds while its request runs; after that, a request with the same fingerprint takes it over. */
  leaseMs: number
}

/**
 * What claiming a key found: it was free (now this request's), or it is held by the same request (done, with its
 * answer; or still running), or by another request (mismatch).
 */
export type ClaimOutcome =
  { state: 'claimed' } | { state: 'done'; status: number; body: string } | { state: 'running' } | { state: 'mismatch' }

export interface IdempotencyStore {
  /**
   * Claims the account's key for a request. A key expired, or claimed by the same fingerprint whose lease ran out
   * (its instance stopped mid-request), is taken over. QuotaExceededError when the account holds its quota of keys.
   */
  claim(claim: KeyClaim): Promise<ClaimOutcome>
  /** Keeps the answer of the request holding `lease` for replay; nothing when the claim is no longer its. */
  complete(accountId: number, key: string, lease: string, status: number, body: string): Promise<void>
  /** Frees the key a request claimed and ends without an answer to keep, so that a retry runs again. */
  release(accountId: number, key: string, lease: string): Promise<void>
  /** Deletes up to `limit` expired keys; resolves with how many went. */
  purgeExpired(limit: number): Promise<number>
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
  /**
   * Idempotency keys held per account, expired ones until purged. Exact on SQLite; on PostgreSQL claims racing at the
   * quota may pass it by as many as run at once.
   */
  idempotencyKeysPerAccount: number
}

/** No quota at all: what storage opened without limits enforces. */
export const NO_LIMITS: StorageLimits = {
  plantsPerAccount: 0,
  subscriptionsPerAccount: 0,
  queuedPerSubscription: 0,
  idempotencyKeysPerAccount: 0,
}

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
    readonly resource: 'plants' | 'subscriptions' | 'tokens' | 'idempotency keys',
    readonly limit: number,
  ) {
    super(`the account holds its quota of ${limit} ${resource}`)
    this.name = 'QuotaExceededError'
  }
}

/** A backend: its five parts over one database. All methods are async so network databases fit. */
export interface Storage {
  readonly plants: PlantStore
  readonly tokens: TokenStore
  readonly webhooks: WebhookStore
  readonly idempotency: IdempotencyStore
  readonly health: HealthCheck
  /** Migration versions applied when this storage was opened (empty when the schema was already current). */
  readonly migrationsApplied: readonly number[]
  close(): Promise<void>
}

/**
 * Connections a PostgreSQL storage opens, beside its pool of `poolSize`, for the outbox's work: the webhook
 * dispatcher's claims, outcomes and upkeep, and the count of queued deliveries /metrics reads. Opened when first
 * used. Neither side waits in the other's queue for a connection: a claim is answered while every request connection
 * is busy, and requests never wait behind delivery statements.
 */
export const DELIVERY_POOL_SIZE = 4

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

// Backups

/** What a backup copied, counted in the copy itself once it passed its integrity check. */
export interface BackupSummary {
  plants: number
  accounts: number
  tokens: number
  subscriptions: number
  /** The size of the backup file. */
  bytes: number
  /** The temporary files that earlier backups to the same file, killed while they copied, left; removed first. */
  staleRemoved: string[]
}

/** How far a backup has gone: `copied` bytes of about `total` (the store's pages in use), then the check. */
export interface BackupProgress {
  phase: 'copying' | 'checking'
  copied: number
  total: number
}

/** How to write a backup. */
export interface BackupOptions {
  /** Replace a file already at the target (else BackupTargetExistsError, and the file is left as it was). */
  force: boolean
  /** Told how far the copy has gone, a few times a second. */
  onProgress?: (progress: BackupProgress) => void
  /** Ends the backup: the temporary file goes, and the promise rejects with the signal's reason. */
  signal?: AbortSignal
}

/** A backend this command cannot copy: its own tools do (the message names them). */
export class BackupUnsupportedError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'BackupUnsupportedError'
  }
}

/** The backup's target is taken and `force` was not given; nothing was written. */
export class BackupTargetExistsError extends Error {
  constructor(readonly target: string) {
    super(`${target} exists`)
    this.name = 'BackupTargetExistsError'
  }
}

/**
 * A backup that could not be made (no store, no target folder, disk full, a copy that fails its check); nothing was
 * written.
 */
export class BackupFailedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'BackupFailedError'
  }
}

// Export and import

/** An account as an export carries it. */
export interface AccountEntry {
  type: 'account'
  name: string
  createdAt: Date
}

/** A token as an export carries it: the hash of its secret, never the secret (none is stored). */
export type TokenEntry = Omit<TokenRecord, 'accountId' | 'accountName'> & {
  type: 'token'
  account: string
  secretHash: Buffer
}

/** A plant of an account, its id exact. */
export interface PlantEntry {
  type: 'plant'
  account: string
  id: bigint
  name: string
  tag: string | null
}

/** A webhook subscription with its signing secret; neither its queue nor its history. */
export interface SubscriptionEntry {
  type: 'subscription'
  id: string
  account: string
  url: string
  secret: string
  eventTypes: string[]
  createdAt: Date
  state: 'active' | 'disabled'
  disabledReason: DisabledReason | null
  disabledAt: Date | null
}

/**
 * One record of a store as export reads it and import writes it: accounts, then tokens (a maker before the tokens
 * it made), then plants (by account, ascending id), then subscriptions.
 */
export type StoreEntry = AccountEntry | TokenEntry | PlantEntry | SubscriptionEntry

/** How many records of each kind an export read or an import wrote. */
export interface EntryCounts {
  accounts: number
  tokens: number
  plants: number
  subscriptions: number
}

/** A store read whole (or one account) and written whole into an empty store; see openTransfer. */
export interface StoreTransfer {
  /**
   * The store's records in the order StoreEntry gives, as one consistent snapshot where the backend allows, read in
   * pages so that memory stays bounded whatever the store holds. With `account`, that account's records alone.
   */
  read(account?: string): AsyncIterable<StoreEntry>
  /**
   * Writes `entries` into this store, all or nothing: nothing is written when `entries` throws or a record is
   * refused. Rebuilds what is derived (plant counts, per-account counts) so quotas hold. StoreNotEmptyError when the
   * store holds accounts, tokens or plants, before anything is read.
   */
  write(entries: AsyncIterable<StoreEntry>): Promise<EntryCounts>
  close(): Promise<void>
}

/** An import into a store that already holds accounts, tokens or plants. */
export class StoreNotEmptyError extends Error {
  constructor() {
    super('the store already holds accounts, tokens or plants; import writes into an empty store only')
    this.name = 'StoreNotEmptyError'
  }
}
