/** Half-open id range [start, end). */
export interface IdRange {
  start: number
  end: number
}

/**
 * Fresh ids come in blocks no run shares: far above the seeded list ids (1..n) and well inside 2^53, so the
 * numbers stay exact in JavaScript and in wrk's Lua. A block is much larger than any run can use.
 */
export const BLOCK_SIZE = 1_000_000_000
const FIRST_BLOCK = 1_000_000_000_000

export class IdBlocks {
  private next = FIRST_BLOCK

  take(): number {
    const start = this.next
    this.next += BLOCK_SIZE
    return start
  }
}

function size(ranges: readonly IdRange[]): number {
  return ranges.reduce((sum, range) => sum + range.end - range.start, 0)
}

/**
 * Ids known to exist in one backend and not yet deleted: POST runs add what they certainly created, DELETE runs
 * take ids out and give back what they did not reach. So the delete scenario mostly reuses rows the post
 * scenario wrote instead of seeding its own (seeding costs as long as deleting).
 */
export class IdPool {
  private ranges: IdRange[] = []

  get size(): number {
    return size(this.ranges)
  }

  add(range: IdRange): void {
    if (range.end > range.start) this.ranges.push(range)
  }

  /** Takes up to `count` ids, split into `parts` lists of about equal size (one per wrk thread). */
  take(count: number, parts: number): IdRange[][] {
    const taken: IdRange[] = []
    let missing = count
    while (missing > 0 && this.ranges.length > 0) {
      const range = this.ranges.shift() as IdRange
      const used = Math.min(missing, range.end - range.start)
      taken.push({ start: range.start, end: range.start + used })
      if (used < range.end - range.start) this.ranges.unshift({ start: range.start + used, end: range.end })
      missing -= used
    }
    return splitRanges(taken, parts)
  }

  /** Gives back each part's ids after the first `consumed[i]` (those were sent, or may have been). */
  giveBack(parts: IdRange[][], consumed: readonly number[]): void {
    parts.forEach((part, index) => {
      let skip = consumed[index] ?? Infinity
      for (const range of part) {
        const used = Math.min(skip, range.end - range.start)
        skip -= used
        this.add({ start: range.start + used, end: range.end })
      }
    })
  }
}

/** Splits every range into `parts` consecutive slices; part i gets slice i of each. */
function splitRanges(ranges: readonly IdRange[], parts: number): IdRange[][] {
  const result: IdRange[][] = Array.from({ length: parts }, () => [])
  for (const range of ranges) {
    const step = Math.ceil((range.end - range.start) / parts)
    result.forEach((part, index) => {
      const start = range.start + index * step
      const end = Math.min(range.end, start + step)
      if (end > start) part.push({ start, end })
    })
  }
  return result
}

/** The wrk script's form: "a:b,c:d" per thread, ';' between threads. */
export function formatRanges(parts: readonly IdRange[][]): string {
  return parts.map((part) => part.map((range) => `${range.start}:${range.end}`).join(',')).join(';')
}
