import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { PAGE_BUDGET_DEFAULTS } from '../../src/config.js'
import { BUSY_UTILIZATION, PageShares, SHARE_WINDOW_MS, type ShareClock } from '../../src/plugins/page-shares.js'

const PAGE_SHARE = PAGE_BUDGET_DEFAULTS.sharePercent / 100

/** A clock the test moves, with the event loop's utilisation it says. */
function fakeClock(utilization = 1) {
  const clock = { at: 0, utilization, now: () => clock.at }
  return Object.assign(clock, {
    advance: (ms: number) => (clock.at += ms),
    shares: (part = PAGE_SHARE) =>
      new PageShares(part, { now: () => clock.at, utilization: () => clock.utilization } satisfies ShareClock),
  })
}

/** Both accounts start a page, and the census counting them is due (it is taken at most every 100 ms). */
function bothActive(shares: PageShares, clock: { advance: (ms: number) => number }) {
  shares.started(1)
  shares.started(2)
  clock.advance(100)
}

describe('PageShares', () => {
  test('never keeps an account alone waiting, however busy the loop and however long its pages took', () => {
    const clock = fakeClock(1)
    const shares = clock.shares()
    shares.started(1)
    shares.spend(1, 5 * SHARE_WINDOW_MS)
    clock.advance(100)
    assert.equal(shares.waitFor(1), 0)
  })

  test('keeps an account whose pages took over its share of a busy loop waiting while another asks for pages, until its time has decayed to its share', () => {
    const clock = fakeClock(1)
    const shares = clock.shares()
    bothActive(shares, clock)
    const share = (PAGE_SHARE * SHARE_WINDOW_MS) / 2
    shares.spend(1, 1.5 * share)
    const wait = shares.waitFor(1)
    // 1.5 shares decay to one in ln(1.5) windows.
    assert.ok(Math.abs(wait - SHARE_WINDOW_MS * Math.log(1.5)) < 1, `waits ${wait} ms`)
    assert.equal(shares.waitFor(2), 0, 'the other account, within its share, goes on')
    clock.advance(wait - 10)
    assert.ok(shares.waitFor(1) > 0, 'still over its share just before')
    clock.advance(11)
    assert.equal(shares.waitFor(1), 0)
  })

  test('lets an account over its share go on while the loop has time to spare, and keeps the shares for a window after the loop was last busy', () => {
    const clock = fakeClock(BUSY_UTILIZATION - 0.01)
    const shares = clock.shares()
    bothActive(shares, clock)
    shares.spend(1, 5 * SHARE_WINDOW_MS)
    assert.equal(shares.waitFor(1), 0, 'a loop with time to spare')
    clock.utilization = BUSY_UTILIZATION
    assert.ok(shares.waitFor(1) > 0, 'a busy loop')
    clock.utilization = BUSY_UTILIZATION - 0.01
    clock.advance(SHARE_WINDOW_MS - 100)
    shares.started(2)
    assert.ok(shares.waitFor(1) > 0, 'within a window of the loop being busy')
    clock.advance(100)
    assert.equal(shares.waitFor(1), 0, 'a window after')
  })

  test('keeps no one waiting with a part of 0 (PLANTSTORE_PAGE_SHARE_PERCENT=0)', () => {
    const clock = fakeClock(1)
    const shares = clock.shares(0)
    bothActive(shares, clock)
    shares.spend(1, 5 * SHARE_WINDOW_MS)
    assert.equal(shares.waitFor(1), 0)
  })

  test('divides a busy loop among the accounts that started a page within the window', () => {
    const clock = fakeClock(1)
    const shares = clock.shares()
    shares.started(1)
    shares.started(2)
    shares.started(3)
    clock.advance(100)
    const [third, half] = [(PAGE_SHARE * SHARE_WINDOW_MS) / 3, (PAGE_SHARE * SHARE_WINDOW_MS) / 2]
    const spent = (third + half) / 2
    shares.spend(1, spent)
    assert.ok(shares.waitFor(1) > 0, 'three accounts: over a share of a third')
    clock.advance(SHARE_WINDOW_MS)
    shares.started(1)
    shares.started(2)
    clock.advance(100)
    shares.spend(1, spent - shares.spent(1))
    assert.equal(shares.waitFor(1), 0, 'account 3 started no page within the window: within a share of half')
  })
})
