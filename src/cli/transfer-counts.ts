import type { EntryCounts } from '../storage/index.js'

const plural = (n: number, one: string) => `${n.toLocaleString('en-US')} ${one}${n === 1 ? '' : 's'}`

/** "2 accounts, 3 tokens, 1,000 plants, 1 subscription": what an export or import moved. */
export function countsText(counts: EntryCounts): string {
  return [
    plural(counts.accounts, 'account'),
    plural(counts.tokens, 'token'),
    plural(counts.plants, 'plant'),
    plural(counts.subscriptions, 'subscription'),
  ].join(', ')
}
