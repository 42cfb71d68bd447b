/**
 * GETs of the servers: pages, and the service's own metrics (src/plugins/metrics.ts) for the backlog scenarios: the
 * webhook dispatcher's claims (`claimDeliveries` calls, timed by src/storage/instrumented.ts), its queue, and the
 * POSTs answered 200.
 */

/** GETs `path`, with the bearer token when one is given: its status, body and Link header. */
export async function getPage(url: string, token: string | undefined, path: string) {
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` }
  const response = await fetch(`${url}${path}`, { headers })
  return { status: response.status, body: await response.text(), link: response.headers.get('link') ?? undefined }
}

/** The service's GET /metrics, as text (the services inherit PLANTSTORE_METRICS_TOKEN from the harness). */
export async function scrapeMetrics(url: string): Promise<string> {
  const page = await getPage(url, process.env.PLANTSTORE_METRICS_TOKEN || undefined, '/metrics')
  if (page.status !== 200) throw new Error(`GET ${url}/metrics: ${page.status}`)
  return page.body
}

/** The sum of the samples named `name` whose labels include `labels`. */
export function total(metrics: string, name: string, labels: Record<string, string> = {}): number {
  return metrics
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0)
}

/** The dispatcher's counters at one moment, or their difference over a run (the queue depth is the later one's). */
export type DispatcherCounts = { claims: number; claimSeconds: number; queueDepth: number }

export async function scrapeDispatcher(url: string): Promise<DispatcherCounts> {
  const metrics = await scrapeMetrics(url)
  const claim = (suffix: string) =>
    total(metrics, `plantstore_storage_call_duration_seconds_${suffix}`, { operation: 'claimDeliveries' })
  return {
    claims: claim('count'),
    claimSeconds: claim('sum'),
    queueDepth: total(metrics, 'plantstore_webhook_queue_depth'),
  }
}

export const countsBetween = (before: DispatcherCounts, after: DispatcherCounts): DispatcherCounts => ({
  claims: after.claims - before.claims,
  claimSeconds: after.claimSeconds - before.claimSeconds,
  queueDepth: after.queueDepth,
})
