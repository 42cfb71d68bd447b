/**
 * The webhook dispatcher's work during a run, from the service's own metrics (src/plugins/metrics.ts), scraped
 * before and after a measured run. Claims are the storage calls `claimDeliveries`
 * (plantstore_storage_call_duration_seconds, timed by src/storage/instrumented.ts around the whole call).
 */
import { getPage } from './http.js'

/** The counters at one moment, or their difference over runs. */
export interface DispatcherCounts {
  /** claimDeliveries calls, whatever their outcome; the seconds they took; those that failed. */
  claims: number
  claimSeconds: number
  claimErrors: number
  /** Cumulative histogram: calls that took at most `le` seconds, ascending, +Inf last. */
  buckets: Array<{ le: number; count: number }>
  delivered: number
  /** Deliveries not yet made (plantstore_webhook_queue_depth, read from the database at scrape time). */
  queueDepth: number
}

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

/** The samples of a Prometheus text exposition (comments skipped). */
export function parseMetrics(text: string): Sample[] {
  return text.split('\n').flatMap((line) => {
    const match = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) return []
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!
    return [{ name: match[1]!, labels, value: match[3] === '+Inf' ? Infinity : Number(match[3]) }]
  })
}

const sum = (samples: Sample[]): number => samples.reduce((total, sample) => total + sample.value, 0)

function dispatcherCounts(samples: Sample[]): DispatcherCounts {
  const claim = (suffix: string) =>
    samples.filter(
      (s) => s.name === `plantstore_storage_call_duration_seconds${suffix}` && s.labels.operation === 'claimDeliveries',
    )
  const bounds = new Map<number, number>()
  for (const sample of claim('_bucket')) {
    // One series per outcome: added up, the histogram of every call.
    const le = sample.labels.le === '+Inf' ? Infinity : Number(sample.labels.le)
    bounds.set(le, (bounds.get(le) ?? 0) + sample.value)
  }
  const attempts = samples.filter((s) => s.name === 'plantstore_webhook_deliveries_total')
  return {
    claims: sum(claim('_count')),
    claimSeconds: sum(claim('_sum')),
    claimErrors: sum(claim('_count').filter((s) => s.labels.outcome === 'error')),
    buckets: [...bounds].sort(([a], [b]) => a - b).map(([le, count]) => ({ le, count })),
    delivered: sum(attempts.filter((s) => s.labels.outcome === 'delivered')),
    queueDepth: sum(samples.filter((s) => s.name === 'plantstore_webhook_queue_depth')),
  }
}

/** `a` plus (or minus) `b`, bucket by bucket; the queue depth is `a`'s. */
function combine(a: DispatcherCounts, b: DispatcherCounts, sign: 1 | -1): DispatcherCounts {
  const other = new Map(b.buckets.map((bucket) => [bucket.le, bucket.count]))
  return {
    claims: a.claims + sign * b.claims,
    claimSeconds: a.claimSeconds + sign * b.claimSeconds,
    claimErrors: a.claimErrors + sign * b.claimErrors,
    buckets: a.buckets.map(({ le, count }) => ({ le, count: count + sign * (other.get(le) ?? 0) })),
    delivered: a.delivered + sign * b.delivered,
    queueDepth: a.queueDepth,
  }
}

/** What happened between two scrapes. */
export const countsBetween = (before: DispatcherCounts, after: DispatcherCounts) => combine(after, before, -1)

/** Runs' differences added up (the queue depth is the last run's). */
export function addCounts(runs: DispatcherCounts[]): DispatcherCounts | undefined {
  return runs.reduce<DispatcherCounts | undefined>((total, run) => (total ? combine(run, total, 1) : run), undefined)
}

/** The smallest bucket bound at least `quantile` of the calls stayed within (Infinity past the last finite one). */
export function quantileBound(counts: DispatcherCounts, quantile: number): number | undefined {
  if (counts.claims <= 0) return undefined
  return counts.buckets.find((b) => b.count >= quantile * counts.claims)?.le ?? Infinity
}

/** The samples of the service's GET /metrics (the services inherit PLANTSTORE_METRICS_TOKEN from the harness). */
export async function scrapeMetrics(url: string): Promise<Sample[]> {
  const page = await getPage(url, process.env.PLANTSTORE_METRICS_TOKEN || undefined, '/metrics')
  if (page.status !== 200) throw new Error(`GET ${url}/metrics: ${page.status}`)
  return parseMetrics(page.body)
}

export async function scrapeDispatcher(url: string): Promise<DispatcherCounts> {
  return dispatcherCounts(await scrapeMetrics(url))
}
