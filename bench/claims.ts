/**
 * The webhook dispatcher's work during a run, from the service's own Prometheus metrics (src/plugins/metrics.ts):
 * scraped before and after a measured run, the difference is what the run saw. Claims are the storage calls
 * `claimDeliveries` (plantstore_storage_call_duration_seconds, timed by src/storage/instrumented.ts around the whole call).
 */
import { request } from 'node:http'

const CLAIM_HISTOGRAM = 'plantstore_storage_call_duration_seconds'
const CLAIM_OPERATION = 'claimDeliveries'

/** The counters at one moment, or their difference over a run. */
export interface DispatcherCounts {
  /** claimDeliveries calls, whatever their outcome. */
  claims: number
  /** Seconds they took in all. */
  claimSeconds: number
  /** Calls that failed (outcome "error"). */
  claimErrors: number
  /** Cumulative histogram: calls that took at most `le` seconds, ascending, +Inf last. */
  buckets: Array<{ le: number; count: number }>
  /** Delivery attempts (plantstore_webhook_deliveries_total, every outcome) and those delivered. */
  attempts: number
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
    const raw = match[3]!
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw)
    return [{ name: match[1]!, labels, value }]
  })
}

const sum = (samples: Sample[]): number => samples.reduce((total, sample) => total + sample.value, 0)

/** The dispatcher's counters in a scrape. */
export function dispatcherCounts(samples: Sample[]): DispatcherCounts {
  const claim = (suffix: string) =>
    samples.filter((s) => s.name === `${CLAIM_HISTOGRAM}${suffix}` && s.labels.operation === CLAIM_OPERATION)
  const bounds = new Map<number, number>()
  for (const sample of claim('_bucket')) {
    const le = sample.labels.le === '+Inf' ? Infinity : Number(sample.labels.le)
    // One series per outcome: added up, the histogram of every call.
    bounds.set(le, (bounds.get(le) ?? 0) + sample.value)
  }
  const attempts = samples.filter((s) => s.name === 'plantstore_webhook_deliveries_total')
  return {
    claims: sum(claim('_count')),
    claimSeconds: sum(claim('_sum')),
    claimErrors: sum(claim('_count').filter((s) => s.labels.outcome === 'error')),
    buckets: [...bounds].sort(([a], [b]) => a - b).map(([le, count]) => ({ le, count })),
    attempts: sum(attempts),
    delivered: sum(attempts.filter((s) => s.labels.outcome === 'delivered')),
    queueDepth: sum(samples.filter((s) => s.name === 'plantstore_webhook_queue_depth')),
  }
}

/** What happened between two scrapes; the queue depth is the later one's. */
export function countsBetween(before: DispatcherCounts, after: DispatcherCounts): DispatcherCounts {
  const earlier = new Map(before.buckets.map((b) => [b.le, b.count]))
  return {
    claims: after.claims - before.claims,
    claimSeconds: after.claimSeconds - before.claimSeconds,
    claimErrors: after.claimErrors - before.claimErrors,
    buckets: after.buckets.map((b) => ({ le: b.le, count: b.count - (earlier.get(b.le) ?? 0) })),
    attempts: after.attempts - before.attempts,
    delivered: after.delivered - before.delivered,
    queueDepth: after.queueDepth,
  }
}

/** Adds up runs' differences (the queue depth is the last run's). */
export function addCounts(runs: DispatcherCounts[]): DispatcherCounts | undefined {
  return runs.reduce<DispatcherCounts | undefined>((total, run) => {
    if (total === undefined) return run
    const bucket = new Map(total.buckets.map((b) => [b.le, b.count]))
    return {
      claims: total.claims + run.claims,
      claimSeconds: total.claimSeconds + run.claimSeconds,
      claimErrors: total.claimErrors + run.claimErrors,
      buckets: run.buckets.map((b) => ({ le: b.le, count: b.count + (bucket.get(b.le) ?? 0) })),
      attempts: total.attempts + run.attempts,
      delivered: total.delivered + run.delivered,
      queueDepth: run.queueDepth,
    }
  }, undefined)
}

/**
 * The smallest bucket bound that at least `quantile` of the calls stayed within: an upper bound on that quantile
 * (Infinity when it lies past the last finite bound; undefined without calls).
 */
export function quantileBound(counts: DispatcherCounts, quantile: number): number | undefined {
  if (counts.claims <= 0) return undefined
  return counts.buckets.find((b) => b.count >= quantile * counts.claims)?.le ?? Infinity
}

/** The dispatcher's counters, scraped from the service's GET /metrics. */
export async function scrapeDispatcher(url: string): Promise<DispatcherCounts> {
  return dispatcherCounts(await scrapeMetrics(url))
}

/** The samples of the service's GET /metrics. */
export function scrapeMetrics(url: string): Promise<Sample[]> {
  // The services inherit the harness's environment, PLANTSTORE_METRICS_TOKEN included.
  const token = process.env.PLANTSTORE_METRICS_TOKEN
  const headers = token ? { authorization: `Bearer ${token}` } : {}
  return new Promise((resolve, reject) => {
    const req = request(`${url}/metrics`, { headers }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET ${url}/metrics: ${res.statusCode}`))
        else resolve(parseMetrics(text))
      })
    })
    req.once('error', reject)
    req.end()
  })
}
