import type { FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify'
import { callerOf } from '../auth/caller.js'
import type { PageBudgetLimits } from '../config.js'
import { ApiError } from '../errors.js'
import { retryAfter, tooManyRequests } from '../limits/too-many.js'
import { lingerOnClose } from '../socket/lingering-close.js'
import {
  MOST_WAIT_MS,
  RETRY_AFTER_SECONDS,
  UNREAD_MS,
  type PageBudget,
  type PageBudgetBound,
  type UnreadPage,
} from './page-budget.js'

function refusal(bound: PageBudgetBound, rows: number, limits: PageBudgetLimits): ApiError {
  const wait = RETRY_AFTER_SECONDS * 1000
  if (bound === 'share') {
    return tooManyRequests(
      'tooMuchPageTime',
      `the account's pages took more than its share of this busy instance's time in the last second; retry in ${RETRY_AFTER_SECONDS} second`,
      wait,
    )
  }
  if (bound === 'account') {
    return tooManyRequests(
      'tooManyPageRows',
      `a page of ${rows} rows would take the account's pages in progress past ${limits.perAccount} rows; read the pages already sent, or retry in ${RETRY_AFTER_SECONDS} second`,
      wait,
    )
  }
  return new ApiError(
    'serverPagesBusy',
    `this instance has ${limits.perProcess} rows of pages in progress; retry in ${RETRY_AFTER_SECONDS} second or on another instance`,
    retryAfter(wait),
  )
}

/**
 * A preHandler for a route that answers pages: holds `rowsOf(request)` rows of the budget for the caller's account
 * from here (the last hook before the handler, after the pipelining limit has let the request's turn come) until the
 * answer is handed to the socket (`finish`) or can no longer be (`close` of the answer or of its connection, as a
 * client that goes away causes), whichever comes first, and then one turn of the event loop more. A page kept out by
 * the budget, or by its account's share of a busy event loop, waits for rows to come back or its share to be free,
 * up to `maxWaitMs` (and MOST_WAITING_PER_ACCOUNT pages of one account); then it is refused, with `Retry-After` and
 * `Connection: close`. A page let through charges its account with the event loop time its handler takes before its
 * first wait (see `hold`).
 *
 * Why it keeps accounts apart: a handler makes its whole page at once (on SQLite synchronously), and Node serves the
 * requests that arrived together one after another. Without a bound, one account's hundreds of connections each had a
 * page made in one go, and every other account's request waited for all of them (seconds). With it, one account makes
 * at most its bound's worth of pages per turn of the event loop (see `release`), and a client that reads slowly keeps
 * its pages in progress, so its further pages wait and are refused, not made; its share bounds how many turns in a
 * row it takes when the loop has none to spare.
 */
export function pageBudgetHook(
  budget: PageBudget,
  rowsOf: (request: FastifyRequest) => number,
  onRefused?: (bound: PageBudgetBound) => void,
  maxWaitMs = MOST_WAIT_MS,
): preHandlerHookHandler {
  const hold = (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void, since: number) => {
    if (droppedWhenGone(reply, done)) return
    const socket = request.raw.socket
    const account = callerOf(request).accountId
    const rows = rowsOf(request)
    const refused = budget.take(account, rows)
    if (refused === undefined) {
      holdUntilAnswered(budget, account, rows, reply)
      // done() runs the handler up to its first wait: on SQLite the whole page, query and JSON. That is the event
      // loop time charged; a wait for PostgreSQL, where the database makes the JSON, is not the loop's, and charging
      // it counted light accounts as heavy on a loaded machine (test/routes/account-isolation.test.ts then failed on
      // PostgreSQL in CI).
      const started = budget.now()
      done()
      budget.spend(account, started)
      return
    }
    // A page larger than the bound itself would wait in vain.
    const mayFit = rows <= Math.min(budget.limits.perAccount, budget.limits.perProcess)
    const left = since + maxWaitMs - Date.now()
    const waiter = mayFit && left > 0 ? budget.wait(account, () => retry()) : undefined
    // Rows come back with a page's end (the waiter tries again then); a share, with time.
    const shareFreeIn = refused === 'share' ? Math.max(1, Math.ceil(budget.shareWait(account))) : Infinity
    const timer =
      waiter && (shareFreeIn < left ? setTimeout(() => retry(), shareFreeIn) : setTimeout(() => refuse(), left))
    const retry = () => {
      clearTimeout(timer)
      if (waiter) budget.cancel(waiter)
      hold(request, reply, done, since)
    }
    const refuse = () => {
      if (waiter) budget.cancel(waiter)
      if (droppedWhenGone(reply, done)) return
      onRefused?.(refused)
      // The connection ends after the refusal (lingering, so the answers before it still arrive): the pages a client
      // pipelined behind it are dropped, not each made or refused in turn.
      reply.header('connection', 'close')
      lingerOnClose(socket)
      done(refusal(refused, rows, budget.limits))
    }
    if (waiter === undefined) refuse()
  }
  return (request, reply, done) => hold(request, reply, done, Date.now())
}

/**
 * Drops the request when no one is left to answer (the client left while the request waited its turn or for rows,
 * or a refusal before it ended the connection): the page is not made, as the pipelining limit does; holding rows
 * for it, a closed connection would never say when to give them back.
 */
function droppedWhenGone(reply: FastifyReply, done: () => void): boolean {
  const socket = reply.request.raw.socket
  if (!socket.destroyed && !socket.writableEnded) return false
  reply.hijack()
  done()
  return true
}

/**
 * Holds the rows taken for a page until its answer is handed over or can no longer be, and a turn more; sets them
 * aside once the answer has waited UNREAD_MS for its client.
 */
function holdUntilAnswered(budget: PageBudget, account: number, rows: number, reply: FastifyReply): void {
  const response = reply.raw
  const socket = reply.request.raw.socket
  let held = true
  let unread: UnreadPage | undefined
  // From the handler's start: a page still being made (a slow query) is looked at again UNREAD_MS later.
  const lookAt = () => {
    if (!response.writableEnded) return void timer.refresh()
    // A reset, as the write stall timeout closes: it frees what the kernel still holds for the connection too.
    unread = budget.setAside(account, rows, () => socket.resetAndDestroy())
  }
  const timer = setTimeout(lookAt, UNREAD_MS).unref()
  const release = () => {
    if (!held) return
    held = false
    clearTimeout(timer)
    response.off('finish', release)
    response.off('close', release)
    socket.off('close', release)
    // Given back on the event loop's next turn, not at once: the kernel takes a whole page from a connection that
    // has room at once, so a page may be made and handed over within one turn, and then the bound would not limit
    // how many pages one account's connections have made in a turn while everyone else's requests wait for the
    // next.
    setImmediate(() => budget.giveBack(account, rows, unread))
  }
  response.once('finish', release)
  response.once('close', release)
  // Node 20 and 22 close only the answer being written when a connection goes: one waiting behind it would never
  // say so itself.
  socket.once('close', release)
}
