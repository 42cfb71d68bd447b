import { policyReports } from './ratelimit-fields.js'

/** One request let go: its place in the order of sends, and how many sent before it were unanswered then. */
export interface Ticket {
  seq: number
  inFlight: number
}

/**
 * What the client knows of one policy's budget, from one answer: the service had `remaining` left when it counted
 * that request. Every request sent after it, and every one unanswered when it was sent (the service may have counted
 * those later), may have spent a unit since: `sent - base` of them, `sent` counting every request let go.
 */
interface Budget {
  remaining: number
  answeredAt: number
  base: number
  /** The refill, `quota` per `windowMs`; undefined when the service did not say (then none until `expiresAt`). */
  quota?: number
  windowMs?: number
  expiresAt: number
}

interface Waiter {
  grant(ticket: Ticket): void
}

/**
 * The units the service has at least for another request now, with `sent` requests sent so far: what it had left,
 * refilled (continuously, as `RateLimit-Policy` says, up to the quota) since the answer came, which is no later than
 * it was counted, less every send that may have been counted since.
 */
function available(budget: Budget, sent: number, now: number): number {
  const { remaining, quota, windowMs } = budget
  const refilled =
    quota === undefined ? remaining : Math.min(quota, remaining + ((now - budget.answeredAt) * quota) / windowMs!)
  return refilled - (sent - budget.base)
}

/** Milliseconds until `budget` has a unit for another request; Infinity when only an answer can tell more. */
function refillMs(budget: Budget, sent: number, now: number): number {
  const needed = 1 + sent - budget.base
  if (budget.quota === undefined || budget.quota < needed) return Infinity
  return ((needed - budget.remaining) * budget.windowMs!) / budget.quota - (now - budget.answeredAt)
}

/**
 * Holds a client's requests so that no more go than the service's rate-limit policies allow. Each answer's
 * `RateLimit` (`r` left of each policy) and `RateLimit-Policy` (`q` per `w` seconds, refilled continuously) give a
 * budget the service has at least: what it had left, refilled from when the answer came, less every request that may
 * have been counted since. A request goes while every policy has a unit in that budget; the others wait, in order,
 * until one is refilled or a newer answer says more. While nothing is known (the first request, or once what an
 * answer without `q`/`w` said runs out at its `t`) one request goes alone and the others wait for its answer. A
 * service that answers without `RateLimit` is not paced.
 */
export class Pacer {
  readonly #budgets = new Map<string, Budget>()
  readonly #queue: Waiter[] = []
  readonly #now: () => number
  /** The service answered without RateLimit fields: nothing to pace by. */
  #open = false
  /** The request sent alone while nothing is known. */
  #probe: number | undefined
  #sent = 0
  #inFlight = 0
  #timer: ReturnType<typeof setTimeout> | undefined

  constructor(now: () => number = () => performance.now()) {
    this.#now = now
  }

  /** Waits until the budgets let one more request go (a retry, `urgent`, before the others waiting). */
  acquire(signal: AbortSignal | null, urgent = false): Promise<Ticket> {
    if (signal?.aborted) return Promise.reject(signal.reason)
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.#queue.splice(this.#queue.indexOf(waiter), 1)
        reject(signal!.reason)
        this.#dispatch()
      }
      const waiter: Waiter = {
        grant: (ticket) => {
          signal?.removeEventListener('abort', onAbort)
          resolve(ticket)
        },
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      if (urgent) this.#queue.unshift(waiter)
      else this.#queue.push(waiter)
      this.#dispatch()
    })
  }

  /** Learns from the answer to a request let go (none when the request failed) and lets go what it now can. */
  settle(ticket: Ticket, response: Response | undefined): void {
    this.#inFlight--
    if (this.#probe === ticket.seq) this.#probe = undefined
    if (response !== undefined) this.#learn(ticket, response)
    this.#dispatch()
  }

  #learn(ticket: Ticket, response: Response): void {
    const reports = policyReports(response.headers)
    if (reports.length === 0) {
      // A success without the fields: the limits are off. Any other (a 401, say) tells nothing of them.
      if (response.ok) this.#budgets.clear()
      this.#open = this.#budgets.size === 0
      return
    }
    this.#open = false
    const now = this.#now()
    const named = new Set(reports.map((report) => report.name))
    for (const name of this.#budgets.keys()) if (!named.has(name)) this.#budgets.delete(name)
    for (const report of reports) {
      const { quota, windowSeconds } = report
      const windowMs = windowSeconds === undefined ? undefined : windowSeconds * 1000
      const expiresAt = quota === undefined ? now + (report.resetSeconds ?? 0) * 1000 : Infinity
      const base = ticket.seq - ticket.inFlight
      const learnt: Budget = { remaining: report.remaining, answeredAt: now, base, quota, windowMs, expiresAt }
      const known = this.#budgets.get(report.name)
      // Each answer's budget is one the service has at least: the larger is kept, unless the policy changed.
      const same = known !== undefined && known.quota === quota && known.windowMs === windowMs && now < known.expiresAt
      if (!same || available(learnt, this.#sent, now) >= available(known, this.#sent, now)) {
        this.#budgets.set(report.name, learnt)
      }
    }
  }

  /** Milliseconds until one more request may go; Infinity until an answer comes. */
  #waitMs(now: number): number {
    for (const [name, budget] of this.#budgets) if (now >= budget.expiresAt) this.#budgets.delete(name)
    if (this.#budgets.size === 0) return this.#open || this.#probe === undefined ? 0 : Infinity
    let wait = 0
    for (const budget of this.#budgets.values()) {
      if (available(budget, this.#sent, now) >= 1) continue
      wait = Math.max(wait, Math.min(refillMs(budget, this.#sent, now), budget.expiresAt - now))
    }
    // Nothing out whose answer could tell more (the ones sent failed): learn again from one request alone.
    if (wait === Infinity && this.#inFlight === 0) {
      this.#budgets.clear()
      return 0
    }
    return wait
  }

  #take(): Ticket {
    const ticket = { seq: ++this.#sent, inFlight: this.#inFlight++ }
    if (this.#budgets.size === 0 && !this.#open) this.#probe = ticket.seq
    return ticket
  }

  #dispatch(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    while (this.#queue.length > 0) {
      const wait = this.#waitMs(this.#now())
      if (wait > 0) {
        if (wait !== Infinity) this.#timer = setTimeout(() => this.#dispatch(), Math.ceil(wait))
        return
      }
      this.#queue.shift()!.grant(this.#take())
    }
  }
}
