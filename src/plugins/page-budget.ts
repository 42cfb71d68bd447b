import { PAGE_BUDGET_DEFAULTS, type PageBudgetLimits } from '../config.js'
import { PageShares } from './page-shares.js'

/**
 * Which bound refused a page: the caller's account's rows, its share of a busy event loop's time (see PageShares), or
 * the whole process's rows.
 */
export type PageBudgetBound = 'account' | 'share' | 'process'

/** Seconds a refused caller is told to wait: pages in progress leave within a few writes to a client that reads. */
export const RETRY_AFTER_SECONDS = 1

/**
 * How long a page kept out by the budget may wait for rows to be given back before it is refused. Rows come back as
 * soon as a page is handed to the socket (a database query, the write of a page to a client that reads): an honest
 * client asking for pages in parallel, or for its next page right after its last, waits that long at most. A client
 * that reads slowly keeps its rows, and its further pages are refused once this is over.
 */
export const MOST_WAIT_MS = 1000

/**
 * Pages of one account that may wait at once; one more is refused at once. Enough for an honest client's parallel
 * pages; few enough that an account pipelining hundreds of pages has most refused rather than all made one after
 * another (with 32, big-page-fairness.test.ts's attacker had nearly every page made, and the other account's p99
 * doubled).
 */
export const MOST_WAITING_PER_ACCOUNT = 8

/**
 * How long a page's answer may wait for its client before its rows are set aside (see PageBudget.setAside). A client
 * that reads takes a page within a few milliseconds on loopback or a LAN; long enough for that, short enough that a
 * page kept out by unread pages waits for them well within MOST_WAIT_MS.
 */
export const UNREAD_MS = 250

/** A page whose rows were set aside while its answer waits for its client; `close` ends its connection. */
export interface UnreadPage {
  account: number
  rows: number
  close: () => void
}

/** A page waiting for rows: `retry` tries to take them again. */
export interface Waiter {
  account: number
  retry: () => void
}

/**
 * Rows of pages in progress, per account and in all: the rows a page may hold (its `limit`, not yet known how many
 * it will hold) from the moment its handler starts until the event loop's turn after its answer has been handed to
 * the socket (see pageBudgetHook, in page-budget-hook.ts).
 *
 * Accounts that do not read cannot take the process's rows from those that do: a page whose answer has waited
 * UNREAD_MS for its client is set aside. Its rows still count against its account, so that account makes no more
 * pages than before, but no longer against the process bound, which then admits only pages being made and written.
 * Pages set aside are held in memory too, so they have a bound of their own, the process bound again: past it the
 * page set aside longest, whose client has read nothing for longest, has its connection closed. Without this, eight
 * accounts each holding one unread page of 1,000 rows held the default process bound of 8,000, and every other
 * account's page waited a second and was refused (503); any rule counting rows alone is beaten by one more account.
 */
export class PageBudget {
  readonly limits: PageBudgetLimits
  readonly #accounts = new Map<number, number>()
  /** Rows of pages being made or written: those the process bound admits against. */
  #total = 0
  /** Pages set aside, the longest set aside first, and their rows. */
  readonly #unread = new Set<UnreadPage>()
  #unreadRows = 0
  /** Pages waiting for rows, in the order they came; each tries again whenever rows are given back. */
  readonly #waiters = new Set<Waiter>()
  readonly #waiting = new Map<number, number>()
  readonly #shares: PageShares

  constructor(
    limits: PageBudgetLimits,
    shares = new PageShares((limits.sharePercent ?? PAGE_BUDGET_DEFAULTS.sharePercent) / 100),
  ) {
    this.limits = limits
    this.#shares = shares
  }

  /** Takes `rows` for `account` and returns undefined; or, taking nothing, the bound they would pass. */
  take(account: number, rows: number): PageBudgetBound | undefined {
    const held = this.#accounts.get(account) ?? 0
    // The account's bounds first: past them, the refusal is the caller's own doing (429), whatever others hold.
    if (held + rows > this.limits.perAccount) return 'account'
    if (this.#shares.waitFor(account) > 0) return 'share'
    if (this.#total + rows > this.limits.perProcess) return 'process'
    this.#accounts.set(account, held + rows)
    this.#total += rows
    this.#shares.started(account)
    return undefined
  }

  /** Milliseconds until `account` is back within its share of a busy event loop's time (0: it is). */
  shareWait(account: number): number {
    return this.#shares.waitFor(account)
  }

  /** The time a page's start and end are read in (see spend). */
  now(): number {
    return this.#shares.now()
  }

  /** Charges `account` with the event loop time a page took from `since` (now(), when it started) to now. */
  spend(account: number, since: number): void {
    this.#shares.spend(account, this.#shares.now() - since)
  }

  /**
   * Gives back rows a page held (`unread` when it was set aside), and lets every waiting page try again, in the order
   * they came.
   */
  giveBack(account: number, rows: number, unread?: UnreadPage): void {
    const held = this.#accounts.get(account)
    if (held === undefined) return
    if (held === rows) this.#accounts.delete(account)
    else this.#accounts.set(account, held - rows)
    // A page closed to make room left the rows set aside already.
    if (unread === undefined) this.#total -= rows
    else if (this.#unread.delete(unread)) this.#unreadRows -= rows
    this.#retryWaiting()
  }

  /**
   * Sets aside the rows of a page whose answer waits for its client: they leave the process bound (its account's
   * stay), and pages kept out try again. Past the process bound of pages set aside, pages are closed, the oldest of
   * the account with the most set aside first (their rows leave at once; their account's when their connection's close gives them back).
   */
  setAside(account: number, rows: number, close: () => void): UnreadPage {
    const page = { account, rows, close }
    this.#total -= rows
    this.#unread.add(page)
    this.#unreadRows += rows
    while (this.#unreadRows > this.limits.perProcess) {
      const evicted = this.#oldestOfMostUnread()
      this.#unread.delete(evicted)
      this.#unreadRows -= evicted.rows
      evicted.close()
    }
    this.#retryWaiting()
    return page
  }

  /**
   * The page to close for room: the oldest of the account with the most rows set aside, so that accounts that leave
   * many pages unread lose theirs before a slow reader with one page loses it.
   */
  #oldestOfMostUnread(): UnreadPage {
    const unreadBy = new Map<number, number>()
    for (const page of this.#unread) unreadBy.set(page.account, (unreadBy.get(page.account) ?? 0) + page.rows)
    let most: UnreadPage | undefined
    for (const page of this.#unread)
      if (most === undefined || unreadBy.get(page.account)! > unreadBy.get(most.account)!) most = page
    return most!
  }

  #retryWaiting(): void {
    const waiters = [...this.#waiters]
    for (const waiter of waiters) this.cancel(waiter)
    for (const waiter of waiters) waiter.retry()
  }

  /**
   * Queues `retry` for the next time rows are given back; undefined, queuing nothing, when MOST_WAITING_PER_ACCOUNT
   * of the account's pages wait already.
   */
  wait(account: number, retry: () => void): Waiter | undefined {
    const waiting = this.#waiting.get(account) ?? 0
    if (waiting >= MOST_WAITING_PER_ACCOUNT) return undefined
    const waiter = { account, retry }
    this.#waiters.add(waiter)
    this.#waiting.set(account, waiting + 1)
    return waiter
  }

  /** Takes a waiting page out of the queue (it is refused, or about to try again). */
  cancel(waiter: Waiter): void {
    if (!this.#waiters.delete(waiter)) return
    const waiting = this.#waiting.get(waiter.account)! - 1
    if (waiting === 0) this.#waiting.delete(waiter.account)
    else this.#waiting.set(waiter.account, waiting)
  }

  /** Pages waiting for rows: the account's, or all of them. */
  waiting(account?: number): number {
    return account === undefined ? this.#waiters.size : (this.#waiting.get(account) ?? 0)
  }

  /** Rows in progress, set aside or not: the account's, or all of them. */
  inProgress(account?: number): number {
    return account === undefined ? this.#total + this.#unreadRows : (this.#accounts.get(account) ?? 0)
  }

  /** Rows of pages set aside, their answers waiting for clients that have not read them (see setAside). */
  unread(): number {
    return this.#unreadRows
  }
}
