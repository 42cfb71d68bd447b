/**
 * The `cursor` of the RFC 8288 `Link` header's rel="next" target, resolved against the request's URL; undefined on
 * the last page.
 */
export function nextCursor(link: string | null, requestUrl: string): string | undefined {
  if (link === null) return undefined
  for (const part of link.split(/,(?=\s*<)/)) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part)
    if (match === null) continue
    const rels = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(match[2]!)
    const values = (rels?.[1] ?? rels?.[2] ?? '').toLowerCase().split(/\s+/)
    if (values.includes('next')) return new URL(match[1]!, requestUrl).searchParams.get('cursor') ?? undefined
  }
  return undefined
}
