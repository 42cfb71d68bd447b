import { encodeCursor } from '../src/routes/cursor.js'
import { getPage } from './http.js'
import { pageBody } from './plants.js'
import { REFERENCE } from './report-rows.js'
import type { Target } from './rounds.js'
import { LIST_LIMIT, LIST_PATH, type AccountKey, type BenchSizes } from './scenarios.js'

/** Deep-page cursors per account: positions spread evenly across it, the Lua script picks among them at random. */
export const DEEP_CURSORS = 1000

/** Ids after which the deep pages start: spread evenly from the second page to the one before the last. */
export function deepPositions(plants: number): number[] {
  const [first, last] = [LIST_LIMIT, plants - LIST_LIMIT - 1]
  const n = Math.min(DEEP_CURSORS, last - first + 1)
  if (n <= 1) return [first]
  return Array.from({ length: n }, (_, i) => first + Math.floor((i * (last - first)) / (n - 1)))
}

const cursor = (after: number) => encodeCursor(BigInt(after))
const cursorPath = (after: number) => `${LIST_PATH}&cursor=${cursor(after)}`

/** The deep pages' cursors of an account of `plants` plants, comma-separated, for the wrk script. */
export const deepCursors = (plants: number): string => deepPositions(plants).map(cursor).join(',')

/**
 * Before measuring, on every service, plain handler and account: the first page is the expected bytes (the
 * listed account's, byte for byte the reference's body) and links to the next page with the cursor the harness
 * encodes (src/routes/cursor.ts), so the deep pages' cursors are ones the service issues; a deep page and the last
 * page (no Link: the account holds exactly plants 1..n) are the expected bytes too.
 */
export async function checkPages(targets: Target[], sizes: BenchSizes): Promise<void> {
  const reference = targets.find((t) => t.server.label === REFERENCE)
  const referenceBody = reference && (await getPage(reference.server.url, reference.tokens.list, LIST_PATH)).body
  for (const target of targets.filter((t) => t.databaseUrl !== undefined)) {
    for (const account of Object.keys(target.tokens) as AccountKey[]) {
      const positions = deepPositions(sizes[account])
      const deep = positions[Math.floor(positions.length / 2)] ?? LIST_LIMIT
      const last = sizes[account] - LIST_LIMIT
      const first = account === 'list' && referenceBody !== undefined ? referenceBody : pageBody(0)
      const pages: Array<[string, string, string | undefined]> = [
        [LIST_PATH, first, `<${cursorPath(LIST_LIMIT)}>; rel="next"`],
        [cursorPath(deep), pageBody(deep), `<${cursorPath(deep + LIST_LIMIT)}>; rel="next"`],
        [cursorPath(last), pageBody(last), undefined],
      ]
      for (const [path, body, link] of pages) {
        const label = `${target.server.label}, ${account} account, GET ${path}`
        const page = await getPage(target.server.url, target.tokens[account], path)
        if (page.status !== 200) throw new Error(`${label}: ${page.status} ${page.body}`)
        if (page.body !== body)
          throw new Error(`${label}: other bytes than expected:\n${page.body}\nexpected:\n${body}`)
        if (page.link !== link) throw new Error(`${label}: Link ${page.link ?? '(none)'}, expected ${link ?? '(none)'}`)
      }
    }
  }
}
