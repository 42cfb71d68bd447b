import { performance, type EventLoopUtilization } from 'node:perf_hooks'

/** How long an account's page time is remembered: the time constant of its decay, and the window N is counted in. */
export const SHARE_WINDOW_MS = 1000

/**
 * Event loop utilisation at or past which the loop is busy: pages then wait while their account is over its share.
 * Half, not nearly all: an attacker kept to its share must keep the loop busy, or the shares would lapse a window
 * later and its pages come all at once again. In big-page-fairness.test.ts with a CPU burner beside it, the other
 * account's p50 was 460 ms with 0.9 and a whole even share, 55-250 ms with 0.5; with half a share, p99 104 ms with
 * 0.9 and 57-83 ms with 0.5.
 */
export const BUSY_UTILIZATION = 0.5

/** How often the event loop's utilisation is read again (over the time since the last reading). */
const UTILIZATION_EVERY_MS = 100

/** How often the accounts active within the window are counted again. */
const CENSUS_EVERY_MS = 100

/** What PageShares reads: the time, and the event loop's utilisation lately (0 to 1). */
export interface ShareClock {
  now(): number
  utilization(): number
}

/** The event loop's utilisation over the last UTILIZATION_EVERY_MS or more, read again when that is over. */
export function loopClock(): ShareClock {
  let last: EventLoopUtilization = performance.eventLoopUtilization()
  let at = performance.now()
  let lately = 0
  return {
    now: () => performance.now(),
    utilization() {
      const now = performance.now()
      if (now - at >= UTILIZATION_EVERY_MS) {
        const current = performance.eventLoopUtilization()
        lately = performance.eventLoopUtilization(current, last).utilization
        last = current
        at = now
      }
      return lately
    },
  }
}

interface AccountTime {
  /** Milliseconds of page time, decayed to `at`. */
  spent: number
  at: number
  /** When the account last started a page. */
  seen: number
}

/**
 * Each account's share of the time pages take, so that a busy event loop goes to the accounts that use it least.
 *
 * Why: the page budget bounds an account's rows in progress, not how many pages it makes one after another. One
 * account whose clients send pages as fast as the kernel takes them had a page made on every turn of the event loop
 * (716 pages of 1,000 rows in 5 s in big-page-fairness.test.ts), and when the process had half a core, every other
 * account's request waited over a second. So the event loop time a page's handler takes before its first wait (on
 * SQLite the query and the JSON) is charged to its account, decayed over SHARE_WINDOW_MS; while the loop is busy (utilisation past BUSY_UTILIZATION, and for a window
 * after), an account whose pages took more than `part` of 1/N of the window, N the accounts that started a page
 * within it, waits until its time has decayed back to its share. A loop with time to spare serves anyone as fast as
 * it can, and an account alone is never kept waiting. The price: two accounts that both ask for big pages as fast as
 * they can, on an instance with no time to spare, are each kept to their share.
 */
export class PageShares {
  readonly #clock: ShareClock
  readonly #part: number
  readonly #windowMs: number
  readonly #accounts = new Map<number, AccountTime>()
  #busyUntil = -Infinity
  /** The accounts active at the last census (see #census), counted again at most every CENSUS_EVERY_MS. */
  #active = new Set<number>()
  #censusAt = -Infinity

  /** `part`: of an even share, the part an account's pages may take (PAGE_BUDGET_DEFAULTS.sharePercent); 0, all. */
  constructor(part: number, clock: ShareClock = loopClock(), windowMs = SHARE_WINDOW_MS) {
    this.#part = part
    this.#clock = clock
    this.#windowMs = windowMs
  }

  /** Milliseconds `account`'s next page should wait for its time to decay back to its share; 0 when it may start now. */
  waitFor(account: number): number {
    const now = this.#clock.now()
    const active = this.#census(now)
    const accounts = active.size + (active.has(account) ? 0 : 1)
    // Alone, an account's pages may take more than the window (pages in parallel), and there is no one to yield to.
    if (this.#part === 0 || accounts === 1 || !this.#busy(now)) return 0
    const spent = this.spent(account)
    const share = (this.#part * this.#windowMs) / accounts
    return spent > share ? this.#windowMs * Math.log(spent / share) : 0
  }

  /** Counts `account` as active from now: it started a page. */
  started(account: number): void {
    const now = this.#clock.now()
    this.#timeOf(account, now).seen = now
  }

  now(): number {
    return this.#clock.now()
  }

  /** Charges `ms` of page time to `account`. */
  spend(account: number, ms: number): void {
    const time = this.#timeOf(account, this.#clock.now())
    time.spent += ms
  }

  /** Milliseconds of page time `account` has spent, decayed to now. */
  spent(account: number): number {
    return this.#accounts.has(account) ? this.#timeOf(account, this.#clock.now()).spent : 0
  }

  #busy(now: number): boolean {
    if (this.#clock.utilization() >= BUSY_UTILIZATION) this.#busyUntil = now + this.#windowMs
    return now < this.#busyUntil
  }

  /**
   * The accounts that started a page within the window. Counted at most every CENSUS_EVERY_MS, so that a page costs
   * the same however many accounts there are; accounts idle for five windows (their time decayed under 1%) are
   * forgotten then.
   */
  #census(now: number): ReadonlySet<number> {
    if (now - this.#censusAt < CENSUS_EVERY_MS) return this.#active
    this.#censusAt = now
    this.#active = new Set()
    for (const [account, time] of this.#accounts) {
      if (now - time.seen < this.#windowMs) this.#active.add(account)
      else if (now - time.seen > 5 * this.#windowMs && now - time.at > 5 * this.#windowMs)
        this.#accounts.delete(account)
    }
    return this.#active
  }

  #timeOf(account: number, now: number): AccountTime {
    let time = this.#accounts.get(account)
    if (time === undefined) {
      time = { spent: 0, at: now, seen: -Infinity }
      this.#accounts.set(account, time)
    }
    time.spent *= Math.exp(-(now - time.at) / this.#windowMs)
    time.at = now
    return time
  }
}
