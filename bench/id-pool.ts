/** Half-open id range [start, end). */
export interface IdRange {
  start: number
  end: number
}

/**
 * Fresh ids come in blocks no run shares: far above the seeded ids (1..n) and well inside 2^53, so they stay exact
 * in JavaScript and in wrk's Lua. A block is much larger than any run can use.
 */
export const BLOCK_SIZE = 1_000_000_000

export class IdBlocks {
  private next = 1_000_000_000_000

  take(): number {
    this.next += BLOCK_SIZE
    return this.next - BLOCK_SIZE
  }
}

/**
 * Ids known to exist and not yet deleted: POST runs add what they certainly created, DELETE runs take ids out and
 * give back what they did not reach, so the delete scenario mostly reuses rows the post scenario wrote.
 */
export class IdPool {
  private ranges: IdRange[] = []

  get size(): number {
    return this.ranges.reduce((sum, range) => sum + range.end - range.start, 0)
  }

  add(range: IdRange): void {
    if (range.end > range.start) this.ranges.push(range)
  }

  /** Takes every id. */
  takeAll(): IdRange[] {
    const taken = this.ranges
    this.ranges = []
    return taken
  }

  /** Gives back the ids of `taken` after the first `consumed` (those were sent, or may have been). */
  giveBack(taken: IdRange[], consumed: number): void {
    for (const range of taken) {
      const used = Math.min(consumed, range.end - range.start)
      consumed -= used
      this.add({ start: range.start + used, end: range.end })
    }
  }
}

/** The wrk script's form: "a:b,c:d". */
export function formatRanges(ranges: readonly IdRange[]): string {
  return ranges.map((range) => `${range.start}:${range.end}`).join(',')
}
