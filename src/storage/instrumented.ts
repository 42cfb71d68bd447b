import { StorageUnavailableError } from './types.js'
import type {
  ClaimedDelivery,
  ClaimOutcome,
  CreateOutcome,
  DeliveryHistory,
  DeliveryOutcome,
  DeliveryRef,
  EventOf,
  HealthCheck,
  IdempotencyStore,
  KeyClaim,
  NewSubscription,
  NewToken,
  PageRequest,
  PlantPage,
  PlantStore,
  Storage,
  StoredPlant,
  StoredToken,
  Subscription,
  SubscriptionFilter,
  TokenRecord,
  TokenStore,
  WebhookStore,
} from './types.js'

/** Told how long one storage call took (`operation`: the metric's label), and whether it failed. */
export type StorageTimer = (operation: string, seconds: number, failed: boolean) => void

/**
 * What every call goes through: its time, for whoever observes, and for a write, whether it failed because the
 * database could not take it, which marks the store as failing until a probe write succeeds (see health).
 */
class Calls {
  readonly #timers = new Set<StorageTimer>()
  failing = false

  observe(timer: StorageTimer): () => void {
    this.#timers.add(timer)
    return () => this.#timers.delete(timer)
  }

  read<T>(operation: string, call: () => Promise<T>): Promise<T> {
    return this.#timed(operation, call)
  }

  async write<T>(operation: string, call: () => Promise<T>): Promise<T> {
    try {
      return await this.#timed(operation, call)
    } catch (err) {
      if (err instanceof StorageUnavailableError) this.failing = true
      throw err
    }
  }

  // then() rather than async/await: one promise per call instead of three, on every request's path.
  #timed<T>(operation: string, call: () => Promise<T>): Promise<T> {
    const started = process.hrtime.bigint()
    let pending: Promise<T>
    try {
      pending = call()
    } catch (err) {
      this.#tell(operation, started, true)
      return Promise.reject(err as Error)
    }
    return pending.then(
      (result) => {
        this.#tell(operation, started, false)
        return result
      },
      (err: unknown) => {
        this.#tell(operation, started, true)
        throw err
      },
    )
  }

  #tell(operation: string, started: bigint, failed: boolean): void {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9
    for (const timer of this.#timers) timer(operation, seconds, failed)
  }
}

class InstrumentedPlants implements PlantStore {
  readonly #inner: PlantStore
  readonly #calls: Calls

  constructor(inner: PlantStore, calls: Calls) {
    this.#inner = inner
    this.#calls = calls
  }

  create(accountId: number, plant: StoredPlant, event: EventOf<StoredPlant>): Promise<CreateOutcome> {
    return this.#calls.write('createPlant', () => this.#inner.create(accountId, plant, event))
  }

  get(accountId: number, id: bigint): Promise<StoredPlant | undefined> {
    return this.#calls.read('getPlant', () => this.#inner.get(accountId, id))
  }

  list(accountId: number, page: PageRequest): Promise<PlantPage> {
    return this.#calls.read('listPlants', () => this.#inner.list(accountId, page))
  }

  delete(accountId: number, id: bigint, event: EventOf<bigint>): Promise<boolean> {
    return this.#calls.write('deletePlant', () => this.#inner.delete(accountId, id, event))
  }
}

class InstrumentedTokens implements TokenStore {
  readonly #inner: TokenStore
  readonly #calls: Calls

  constructor(inner: TokenStore, calls: Calls) {
    this.#inner = inner
    this.#calls = calls
  }

  find(secretHash: Buffer): Promise<StoredToken | undefined> {
    return this.#calls.read('findToken', () => this.#inner.find(secretHash))
  }

  create(token: NewToken, quota?: number): Promise<TokenRecord> {
    return this.#calls.write('createToken', () => this.#inner.create(token, quota))
  }

  createFirst(token: NewToken): Promise<TokenRecord | undefined> {
    return this.#calls.write('createFirstToken', () => this.#inner.createFirst(token))
  }

  list(accountName?: string): Promise<TokenRecord[]> {
    return this.#calls.read('listTokens', () => this.#inner.list(accountName))
  }

  revoke(id: string): Promise<boolean> {
    return this.#calls.write('revokeToken', () => this.#inner.revoke(id))
  }

  remove(id: string, accountId: number): Promise<boolean> {
    return this.#calls.write('removeToken', () => this.#inner.remove(id, accountId))
  }

  accountId(name: string): Promise<number> {
    return this.#calls.write('ensureAccount', () => this.#inner.accountId(name))
  }

  count(): Promise<number> {
    return this.#calls.read('countTokens', () => this.#inner.count())
  }
}

class InstrumentedWebhooks implements WebhookStore {
  readonly #inner: WebhookStore
  readonly #calls: Calls

  constructor(inner: WebhookStore, calls: Calls) {
    this.#inner = inner
    this.#calls = calls
  }

  createSubscription(subscription: NewSubscription): Promise<Subscription> {
    return this.#calls.write('createSubscription', () => this.#inner.createSubscription(subscription))
  }

  listSubscriptions(filter?: SubscriptionFilter): Promise<Subscription[]> {
    return this.#calls.read('listSubscriptions', () => this.#inner.listSubscriptions(filter))
  }

  deleteSubscription(id: string, accountId?: number): Promise<boolean> {
    return this.#calls.write('deleteSubscription', () => this.#inner.deleteSubscription(id, accountId))
  }

  enableSubscription(id: string, accountId?: number): Promise<Subscription | undefined> {
    return this.#calls.write('enableSubscription', () => this.#inner.enableSubscription(id, accountId))
  }

  claimDeliveries(limit: number, leaseMs: number, perAccount: number): Promise<ClaimedDelivery[]> {
    return this.#calls.write('claimDeliveries', () => this.#inner.claimDeliveries(limit, leaseMs, perAccount))
  }

  finishDelivery(delivery: DeliveryRef, outcome: DeliveryOutcome): Promise<void> {
    return this.#calls.write('finishDelivery', () => this.#inner.finishDelivery(delivery, outcome))
  }

  settleDisabled(limit: number): Promise<number> {
    return this.#calls.write('settleDisabled', () => this.#inner.settleDisabled(limit))
  }

  purgeFailedDeliveries(before: Date, limit: number): Promise<number> {
    return this.#calls.write('purgeFailedDeliveries', () => this.#inner.purgeFailedDeliveries(before, limit))
  }

  deliveryHistory(subscriptionId: string, limit: number): Promise<DeliveryHistory> {
    return this.#calls.read('deliveryHistory', () => this.#inner.deliveryHistory(subscriptionId, limit))
  }

  countPendingDeliveries(): Promise<number> {
    return this.#calls.read('countPendingDeliveries', () => this.#inner.countPendingDeliveries())
  }
}

class InstrumentedIdempotency implements IdempotencyStore {
  readonly #inner: IdempotencyStore
  readonly #calls: Calls

  constructor(inner: IdempotencyStore, calls: Calls) {
    this.#inner = inner
    this.#calls = calls
  }

  claim(claim: KeyClaim): Promise<ClaimOutcome> {
    return this.#calls.write('claimIdempotencyKey', () => this.#inner.claim(claim))
  }

  complete(accountId: number, key: string, lease: string, status: number, body: string): Promise<void> {
    return this.#calls.write('completeIdempotencyKey', () => this.#inner.complete(accountId, key, lease, status, body))
  }

  release(accountId: number, key: string, lease: string): Promise<void> {
    return this.#calls.write('releaseIdempotencyKey', () => this.#inner.release(accountId, key, lease))
  }

  purgeExpired(limit: number): Promise<number> {
    return this.#calls.write('purgeIdempotencyKeys', () => this.#inner.purgeExpired(limit))
  }
}

/**
 * A ping that answers for writes too. A database can answer reads while refusing writes (disk full, read-only,
 * SQLite's write lock held by another process): once a write has failed that way, ping() commits a probe write and
 * fails until one succeeds. Only the probe clears the mark: a write that changed nothing (a DELETE of an absent id,
 * an identical re-POST) can succeed on a full disk. Readiness so reports the outage and sees the recovery without
 * client traffic, while a healthy store's ping() stays a read. Per process: each instance reports what its own
 * writes met.
 */
class InstrumentedHealth implements HealthCheck {
  readonly #inner: HealthCheck
  readonly #calls: Calls

  constructor(inner: HealthCheck, calls: Calls) {
    this.#inner = inner
    this.#calls = calls
  }

  async ping(): Promise<void> {
    await this.#calls.read('ping', () => this.#inner.ping())
    if (!this.#calls.failing) return
    await this.probeWrite()
    this.#calls.failing = false
  }

  // Timed as a read: it writes, but its failure must not mark the store once more, only its success clear it.
  probeWrite(): Promise<void> {
    return this.#calls.read('probeWrite', () => this.#inner.probeWrite())
  }
}

/**
 * Storage as every part of the service uses it, built where it is opened: each call timed for whoever observes
 * (the app's metrics) and each write watched for unavailability (see InstrumentedHealth). Each part implements its
 * interface method by method, stating whether the call reads or writes, so a method added to an interface and not
 * classified here fails to compile.
 */
export class InstrumentedStorage implements Storage {
  readonly #inner: Storage
  readonly #calls = new Calls()
  readonly plants: PlantStore
  readonly tokens: TokenStore
  readonly webhooks: WebhookStore
  readonly idempotency: IdempotencyStore
  readonly health: HealthCheck

  constructor(inner: Storage) {
    this.#inner = inner
    this.plants = new InstrumentedPlants(inner.plants, this.#calls)
    this.tokens = new InstrumentedTokens(inner.tokens, this.#calls)
    this.webhooks = new InstrumentedWebhooks(inner.webhooks, this.#calls)
    this.idempotency = new InstrumentedIdempotency(inner.idempotency, this.#calls)
    this.health = new InstrumentedHealth(inner.health, this.#calls)
  }

  // Lifecycle, not calls: neither is timed nor watched.
  get migrationsApplied(): readonly number[] {
    return this.#inner.migrationsApplied
  }

  /** Tells `timer` of every call from now on; returns the function that stops it. */
  observe(timer: StorageTimer): () => void {
    return this.#calls.observe(timer)
  }

  close(): Promise<void> {
    return this.#inner.close()
  }
}
