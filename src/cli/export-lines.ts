import { EXPORT_FORMAT, EXPORT_VERSION, type EndLine, type ExportHeader } from '../schemas/transfer.js'
import type { EntryCounts, StoreEntry } from '../storage/index.js'

const iso = (date: Date | null): string | null => date?.toISOString() ?? null

/** The first line of an export of the whole store (account null) or one account. */
export function headerLine(account: string | null, exportedAt = new Date()): string {
  const header: ExportHeader = {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    exportedAt: exportedAt.toISOString(),
    account,
  }
  return JSON.stringify(header)
}

/** The last line: what the export holds, checked by import so that a cut-off export is refused. */
export function endLine(counts: EntryCounts): string {
  const end: EndLine = {
    type: 'end',
    counts: {
      accounts: counts.accounts,
      tokens: counts.tokens,
      plants: counts.plants,
      subscriptions: counts.subscriptions,
    },
  }
  return JSON.stringify(end)
}

/** One record as its line (without the line end), as docs/export-format.md describes it. */
export function entryLine(entry: StoreEntry): string {
  switch (entry.type) {
    case 'account':
      return JSON.stringify({ type: 'account', name: entry.name, createdAt: iso(entry.createdAt) })
    case 'token':
      return JSON.stringify({
        type: 'token',
        id: entry.id,
        account: entry.account,
        secretHash: entry.secretHash.toString('base64url'),
        scopes: entry.scopes,
        label: entry.label,
        createdAt: iso(entry.createdAt),
        expiresAt: iso(entry.expiresAt),
        revokedAt: iso(entry.revokedAt),
        createdBy: entry.createdBy,
      })
    case 'plant':
      return JSON.stringify({
        type: 'plant',
        account: entry.account,
        id: entry.id.toString(),
        name: entry.name,
        tag: entry.tag,
      })
    case 'subscription':
      return JSON.stringify({
        type: 'subscription',
        id: entry.id,
        account: entry.account,
        url: entry.url,
        secret: entry.secret,
        eventTypes: entry.eventTypes,
        createdAt: iso(entry.createdAt),
        state: entry.state,
        disabledReason: entry.disabledReason,
        disabledAt: iso(entry.disabledAt),
      })
  }
}
