import type { EntryCounts } from '../storage/index.js'

/** "1 plant", "1,000 plants": `n` as `number` writes it, then the noun, plural unless `n` is 1. */
export const counted = (n: number, one: string, number = (n: number) => n.toLocaleString('en-US')): string =>
  `${number(n)} ${one}${n === 1 ? '' : 's'}`

/** "2 accounts, 3 tokens, 1,000 plants, 1 subscription": what an export or import moved. */
export function countsText(counts: EntryCounts): string {
  return [
    counted(counts.accounts, 'account'),
    counted(counts.tokens, 'token'),
    counted(counts.plants, 'plant'),
    counted(counts.subscriptions, 'subscription'),
  ].join(', ')
}
