import { setTimeout as sleep } from 'node:timers/promises'
import { SETTLE_BATCH, type ClaimedDelivery, type DeliveryOutcome, type WebhookStore } from '../storage/index.js'
import { send, type AttemptResult } from './send.js'
import { signatureHeaders } from './signature.js'

/** How the dispatcher delivers: its timeouts, retry schedule and limits. */
export interface DispatcherOptions {
  /** Longest a receiver may take to answer one attempt. */
  timeoutMs: number
  /** The first retry's delay; each further one doubles it (jittered), up to an hour. */
  retryBaseMs: number
  /** A subscription whose attempts have all failed for this long is disabled (24 h in production). */
  giveUpAfterMs: number
  /** How long failed deliveries are kept before they are purged. */
  failedRetentionMs: number
  /** Whether receivers may be private, loopback or link-local addresses. */
  allowPrivate: boolean
  /** Attempts in flight at once, per process. */
  concurrency: number
  /** Attempts in flight at once for one account's subscriptions, over every instance. */
  perAccount: number
  /** How often the outbox is read when it had nothing due. */
  pollMs?: number
  /** How often failed deliveries past their retention are purged. */
  purgeEveryMs?: number
  /** Told of every attempt: its outcome, how long it took, and how old its event was by its end. */
  onAttempt?: (outcome: DeliveryOutcome['state'], seconds: number, eventAgeSeconds: number) => void
  /** Told when reading or writing the outbox fails (the dispatcher keeps going). */
  onError?: (err: unknown) => void
  /** Runs each attempt inside a span of its own, whose headers (`traceparent`) the attempt sends; none when absent. */
  traceAttempt?: (
    delivery: ClaimedDelivery,
    attempt: (headers: Record<string, string>) => Promise<AttemptResult>,
  ) => Promise<AttemptResult>
}

const MAX_RETRY_DELAY_MS = 3_600_000
// How much longer than the attempt's timeout a claim lasts: time to record the outcome.
const LEASE_MARGIN_MS = 10_000
// Failed deliveries deleted per purge statement: a long backlog of them goes in short transactions.
const PURGE_BATCH = 1000
/**
 * How long an attempt may run before it can be cut to make room, every slot being busy, for an account with none in
 * flight anywhere (at most the attempt's timeout). A receiver that answers within it is never cut; one that takes
 * longer is cut only while another account waits, and is tried again later (deferredOutcome), not counted as a failure.
 */
export const PATIENCE_MS = 1000

/** An attempt in flight: when it began, and how to cut it short. */
interface Running {
  startedAt: number
  cut: AbortController
}

/**
 * Slots of a process's `concurrency` kept for accounts with no attempt in flight anywhere, one slot each: a quarter,
 * and at least one of two or more. Accounts already delivering share the rest, `perAccount` each at most, so
 * accounts whose receivers never answer hold every slot only when there are more of them than the shared slots hold
 * plus the reserve (3 + 4 with the defaults, where 4 held all 16 and another account's event waited for an attempt
 * to time out, 10 s), and an account just starting to deliver finds a slot at once while fewer do.
 */
export function reservedSlots(concurrency: number): number {
  return concurrency < 2 ? 0 : Math.max(1, Math.floor(concurrency / 4))
}

/** The delay before retry number `failures + 1`: exponential, capped at an hour, with jitter (50 to 100 %). */
export function retryDelayMs(failures: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** Math.min(failures, 30), MAX_RETRY_DELAY_MS) * (0.5 + Math.random() / 2)
}

/** What an attempt's result means for its subscription: delivered, retry after a backoff, or give up on it. */
export function outcomeOf(
  delivery: Pick<ClaimedDelivery, 'failures' | 'failingSince'>,
  result: AttemptResult,
  attempt: { startedAt: Date; durationMs: number },
  options: Pick<DispatcherOptions, 'retryBaseMs' | 'giveUpAfterMs'>,
  now = Date.now(),
): DeliveryOutcome {
  const report = { ...attempt, status: result.status, error: result.error }
  if (result.ok) return { ...report, state: 'delivered' }
  // Counted from the first failure since the subscription's last success: a circuit breaker on the receiver, not
  // on one event, so a receiver that is down gets one backoff, not one per queued event.
  const failingSince = delivery.failingSince ?? attempt.startedAt
  if (now - failingSince.getTime() >= options.giveUpAfterMs) return { ...report, state: 'failed' }
  const nextAttemptAt = new Date(now + retryDelayMs(delivery.failures, options.retryBaseMs))
  return { ...report, state: 'retry', nextAttemptAt }
}

/**
 * An attempt cut short to make room for another account (#makeRoom): tried again after the first retry's delay, and
 * not counted against its receiver, whose backoff and give-up period stay as they were; so accounts that keep every
 * slot busy cannot get another account's slow receiver disabled.
 */
export function deferredOutcome(
  result: AttemptResult,
  attempt: { startedAt: Date; durationMs: number },
  options: Pick<DispatcherOptions, 'retryBaseMs'>,
  now = Date.now(),
): DeliveryOutcome {
  const nextAttemptAt = new Date(now + retryDelayMs(0, options.retryBaseMs))
  return { ...attempt, status: result.status, error: result.error, state: 'deferred', nextAttemptAt }
}

/** An attempt that threw, as a failed attempt: the error's message (never a stack) is what the records keep. */
function thrown(err: unknown): AttemptResult {
  return { ok: false, status: null, error: `attempt failed: ${err instanceof Error ? err.message : String(err)}` }
}

type Settings = Required<Omit<DispatcherOptions, 'onAttempt' | 'onError' | 'traceAttempt'>> & DispatcherOptions

/**
 * Delivers the outbox: claims the next attempt of ready subscriptions (leased, so a crash mid-attempt only delays
 * one), signs and POSTs each, and records the outcome. Every instance may run one: claims never overlap. At least
 * once: an attempt whose outcome was not recorded (a crash, a lost database) is made again after its lease.
 */
export class WebhookDispatcher {
  readonly #outbox: WebhookStore
  readonly #options: Settings
  readonly #inFlight = new Map<Promise<void>, Running>()
  /** Of those, the attempts in slots of the reserve (see reservedSlots). */
  readonly #reserved = new Set<Promise<void>>()
  #stopped = false
  #loop: Promise<void> | undefined
  #upkeep: Promise<void> | undefined
  readonly #stopping = new AbortController()
  #wake: (() => void) | undefined
  // Set by a wake-up that came while the loop was claiming: the next pause then returns at once.
  #woken = false
  #purgedAt = 0

  constructor(outbox: WebhookStore, options: DispatcherOptions) {
    this.#outbox = outbox
    this.#options = { pollMs: 250, purgeEveryMs: 60_000, ...options }
  }

  /** Attempts in flight in this process. */
  get inFlight(): number {
    return this.#inFlight.size
  }

  /** Starts delivering in the background. */
  start(): void {
    this.#loop ??= this.#run()
    this.#upkeep ??= this.#keepUp()
  }

  /** Stops claiming and waits for the attempts in flight (each bounded by the timeout). */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#stopping.abort()
    this.#poke()
    await this.#loop
    await this.#upkeep
    await Promise.allSettled(this.#inFlight.keys())
  }

  async #run(): Promise<void> {
    const { concurrency, pollMs } = this.#options
    const reserve = reservedSlots(concurrency)
    while (!this.#stopped) {
      // Either may be one over its share while a cut attempt records its failure (#makeRoom).
      const reservedFree = Math.max(reserve - this.#reserved.size, 0)
      const shared = Math.max(concurrency - reserve - (this.#inFlight.size - this.#reserved.size), 0)
      let claimed: ClaimedDelivery[] = []
      if (shared > 0) {
        claimed = await this.#claim(shared, this.#options.perAccount)
        for (const delivery of claimed) this.#start(delivery, false)
      }
      // The reserve, one slot per account with no attempt in flight anywhere, when the shared slots are all taken
      // (had they not been, such an account's next attempt would have had one: it ranks first).
      let reserved: ClaimedDelivery[] = []
      if (reservedFree > 0 && claimed.length === shared) {
        reserved = await this.#claim(reservedFree, 1)
        for (const delivery of reserved) this.#start(delivery, true)
      }
      const free = shared + reservedFree
      if (claimed.length + reserved.length === free) await this.#makeRoom()
      // Every slot busy, or nothing more due: wait for an attempt to finish or the next poll. Never loop without
      // waiting, or the attempts in flight (and the whole process) would never get to run.
      if (free === 0 || claimed.length + reserved.length < free) await this.#pause(pollMs)
    }
  }

  /**
   * Claims up to `limit` attempts, at most `perAccount` of one account's subscriptions leased at once over every
   * instance. The lease outlives the attempt's timeout, so a live attempt is never claimed twice; after a crash the
   * subscription is ready again once it runs out.
   */
  #claim(limit: number, perAccount: number): Promise<ClaimedDelivery[]> {
    const leaseMs = this.#options.timeoutMs + LEASE_MARGIN_MS
    return this.#outbox.claimDeliveries(limit, leaseMs, perAccount).catch((err: unknown) => {
      this.#options.onError?.(err)
      return []
    })
  }

  /**
   * Every slot busy: when an account with no attempt in flight anywhere has one due, the attempt running longest, if
   * past PATIENCE_MS, is cut for it (deferred, not a failure of its receiver) and the newcomer takes its slot (one
   * over the bound while the cut one records its outcome). So accounts whose receivers never answer cannot keep another waiting for a whole timeout, however many
   * they are; the reserve serves newcomers at once while they are few.
   */
  async #makeRoom(): Promise<void> {
    const patience = Math.min(PATIENCE_MS, this.#options.timeoutMs)
    let oldest: [Promise<void>, Running] | undefined
    for (const entry of this.#inFlight)
      if (oldest === undefined || entry[1].startedAt < oldest[1].startedAt) oldest = entry
    if (oldest === undefined || oldest[1].cut.signal.aborted || performance.now() - oldest[1].startedAt < patience)
      return
    const [waiting] = await this.#claim(1, 1)
    if (waiting === undefined) return
    oldest[1].cut.abort(`cut after ${patience} ms: every delivery slot was busy and another account's event was due`)
    this.#start(waiting, this.#reserved.has(oldest[0]))
  }

  /** Starts an attempt in a slot (of the reserve or not), which it holds until it ends however it ends. */
  #start(delivery: ClaimedDelivery, reserved: boolean): void {
    const cut = new AbortController()
    const attempt = this.#attempt(delivery, cut.signal)
    this.#inFlight.set(attempt, { startedAt: performance.now(), cut })
    if (reserved) this.#reserved.add(attempt)
    const free = () => {
      this.#inFlight.delete(attempt)
      this.#reserved.delete(attempt)
    }
    attempt.then(free, (err: unknown) => {
      free()
      this.#options.onError?.(err)
    })
  }

  /**
   * Upkeep beside delivery, so that claims never wait for it: the queues of disabled subscriptions failed a batch at
   * a time (each its own short transaction, one after another while there are more), and failed deliveries past
   * their retention purged.
   */
  async #keepUp(): Promise<void> {
    while (!this.#stopped) {
      await this.#purgeWhenDue()
      const settled = await this.#outbox.settleDisabled(SETTLE_BATCH).catch((err: unknown) => {
        this.#options.onError?.(err)
        return 0
      })
      if (settled === 0) await sleep(this.#options.pollMs, undefined, { signal: this.#stopping.signal }).catch(() => {})
    }
  }

  /** Deletes failed deliveries past their retention, a batch at a time, at most once per purgeEveryMs. */
  async #purgeWhenDue(): Promise<void> {
    if (Date.now() - this.#purgedAt < this.#options.purgeEveryMs) return
    this.#purgedAt = Date.now()
    const before = new Date(Date.now() - this.#options.failedRetentionMs)
    await this.#outbox.purgeFailedDeliveries(before, PURGE_BATCH).catch((err: unknown) => {
      this.#options.onError?.(err)
    })
  }

  /** Waits `ms`, or less when an attempt finishes: its subscription's next event may be due at once. */
  #pause(ms: number): Promise<void> {
    if (this.#woken || this.#stopped) {
      this.#woken = false
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#poke(), ms)
      this.#wake = () => {
        clearTimeout(timer)
        this.#wake = undefined
        resolve()
      }
    })
  }

  /** Ends the current pause, or the next one if the loop is busy claiming. */
  #poke(): void {
    if (this.#wake === undefined) this.#woken = true
    else this.#wake()
  }

  async #attempt(delivery: ClaimedDelivery, signal: AbortSignal): Promise<void> {
    const startedAt = new Date()
    const started = performance.now()
    const headers = {
      ...signatureHeaders(delivery.secret, delivery.eventId, delivery.body),
      'plantstore-event-type': delivery.eventType,
    }
    const attempt = (trace: Record<string, string>) =>
      send(delivery.url, { ...headers, ...trace }, delivery.body, { ...this.#options, signal })
    const { traceAttempt } = this.#options
    // Whatever an attempt throws, at once or later (a header Node refuses, a stored URL the tracing cannot read), is
    // that attempt's failure, recorded like any other: left to reject, it would be unhandled and end the process.
    const result = await Promise.resolve()
      .then(() => (traceAttempt ? traceAttempt(delivery, attempt) : attempt({})))
      .catch((err: unknown) => thrown(err))
    const durationMs = performance.now() - started
    const outcome =
      signal.aborted && !result.ok
        ? deferredOutcome(result, { startedAt, durationMs }, this.#options)
        : outcomeOf(delivery, result, { startedAt, durationMs }, this.#options)
    const age = (Date.now() - delivery.createdAt.getTime()) / 1000
    this.#options.onAttempt?.(outcome.state, durationMs / 1000, age)
    await this.#outbox.finishDelivery(delivery, outcome).catch((err: unknown) => this.#options.onError?.(err))
    this.#poke()
  }
}
