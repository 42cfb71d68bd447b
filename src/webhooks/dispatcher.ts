import type { ClaimedDelivery, DeliveryOutcome, Storage } from '../storage/types.js'
import { send, type AttemptResult } from './send.js'
import { signatureHeaders } from './signature.js'

/** How the dispatcher delivers: its timeouts, retry schedule and limits. */
export interface DispatcherOptions {
  /** Longest a receiver may take to answer one attempt. */
  timeoutMs: number
  /** The first retry's delay; each further one doubles it (jittered), up to an hour. */
  retryBaseMs: number
  /** A delivery still failing this long after its first attempt is marked failed (24 h in production). */
  giveUpAfterMs: number
  /** Whether receivers may be private, loopback or link-local addresses. */
  allowPrivate: boolean
  /** How often the outbox is read when it had nothing due. */
  pollMs?: number
  /** Attempts in flight at once, per process. */
  concurrency?: number
  /** Told of every attempt: its outcome, how long it took, and how old its event was by its end. */
  onAttempt?: (outcome: DeliveryOutcome['state'], seconds: number, eventAgeSeconds: number) => void
  /** Told when reading or writing the outbox fails (the dispatcher keeps going). */
  onError?: (err: unknown) => void
}

const MAX_RETRY_DELAY_MS = 3_600_000
// How much longer than the attempt's timeout a claim lasts: time to record the outcome.
const LEASE_MARGIN_MS = 10_000

/** The delay before retry number `attempts + 1`: exponential, capped at an hour, with jitter (50 to 100 %). */
export function retryDelayMs(attempts: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** attempts, MAX_RETRY_DELAY_MS) * (0.5 + Math.random() / 2)
}

/** What an attempt's result means for its delivery. */
export function outcomeOf(
  delivery: Pick<ClaimedDelivery, 'attempts' | 'firstAttemptAt'>,
  result: AttemptResult,
  options: Pick<DispatcherOptions, 'retryBaseMs' | 'giveUpAfterMs'>,
  now = Date.now(),
): DeliveryOutcome {
  if (result.ok) return { state: 'delivered' }
  const error = result.error ?? 'failed'
  // Counted from the first attempt, not the event: one queued behind a failing event gets its own full period.
  if (now - delivery.firstAttemptAt.getTime() >= options.giveUpAfterMs) {
    return { state: 'failed', status: result.status, error }
  }
  const nextAttemptAt = new Date(now + retryDelayMs(delivery.attempts, options.retryBaseMs))
  return { state: 'retry', nextAttemptAt, status: result.status, error }
}

/**
 * Delivers the outbox: claims due deliveries (leased, so a crash mid-attempt only delays one), signs and POSTs
 * each, and records the outcome. Every instance may run one: claims never overlap. At least once: an attempt
 * whose outcome was not recorded (a crash, a lost database) is made again after its lease.
 */
export class WebhookDispatcher {
  readonly #storage: Storage
  readonly #options: Required<Omit<DispatcherOptions, 'onAttempt' | 'onError'>> & DispatcherOptions
  readonly #inFlight = new Set<Promise<void>>()
  #stopped = false
  #loop: Promise<void> | undefined
  #wake: (() => void) | undefined

  constructor(storage: Storage, options: DispatcherOptions) {
    this.#storage = storage
    this.#options = { pollMs: 250, concurrency: 16, ...options }
  }

  /** Starts delivering in the background. */
  start(): void {
    this.#loop ??= this.#run()
  }

  /** Stops claiming and waits for the attempts in flight (each bounded by the timeout). */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#wake?.()
    await this.#loop
    await Promise.all(this.#inFlight)
  }

  async #run(): Promise<void> {
    const { concurrency, pollMs, timeoutMs } = this.#options
    while (!this.#stopped) {
      const free = concurrency - this.#inFlight.size
      let claimed: ClaimedDelivery[] = []
      if (free > 0) {
        // The lease outlives the attempt's timeout, so a live attempt is never claimed twice; after a crash the
        // delivery is due again once it runs out.
        claimed = await this.#storage.claimDeliveries(free, timeoutMs + LEASE_MARGIN_MS).catch((err: unknown) => {
          this.#options.onError?.(err)
          return []
        })
        for (const delivery of claimed) this.#track(this.#attempt(delivery))
      }
      // Every slot busy, or nothing more due: wait for an attempt to finish or the next poll. Never loop without
      // waiting, or the attempts in flight (and the whole process) would never get to run.
      if (free === 0 || claimed.length < free) await this.#pause(pollMs)
    }
  }

  /** Waits `ms`, or less when an attempt finishes: its subscription's next event may be due at once. */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#wake?.(), ms)
      this.#wake = () => {
        clearTimeout(timer)
        this.#wake = undefined
        resolve()
      }
    })
  }

  #track(attempt: Promise<void>): void {
    this.#inFlight.add(attempt)
    void attempt.finally(() => this.#inFlight.delete(attempt))
  }

  async #attempt(delivery: ClaimedDelivery): Promise<void> {
    const started = performance.now()
    const headers = {
      ...signatureHeaders(delivery.secret, delivery.eventId, delivery.body),
      'plantstore-event-type': delivery.eventType,
    }
    const result = await send(delivery.url, headers, delivery.body, this.#options)
    const outcome = outcomeOf(delivery, result, this.#options)
    const age = (Date.now() - delivery.createdAt.getTime()) / 1000
    this.#options.onAttempt?.(outcome.state, (performance.now() - started) / 1000, age)
    await this.#storage.finishDelivery(delivery, outcome).catch((err: unknown) => this.#options.onError?.(err))
    this.#wake?.()
  }
}
