import { Agent, request } from 'node:http'
import type { IdRange } from './id-pool.js'
import { seedPlant } from './plants.js'

const CONCURRENCY = 50

function post(agent: Agent, url: string, token: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/plants`,
      {
        agent,
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
      (res) => {
        let text = ''
        res.on('data', (chunk: Buffer) => (text += chunk.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
      },
    )
    req.once('error', reject)
    req.end(body)
  })
}

/**
 * Stores the seed plants with ids in `range` through the service's own API, CONCURRENCY at a time. Plants that
 * exist already answer 200 too (an identical re-POST), so seeding again tops up. Returns the rate (plants/s),
 * the harness's first estimate of how fast a backend writes.
 */
export async function seedRange(url: string, token: string, range: IdRange): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY })
  const started = performance.now()
  let next = range.start
  const worker = async (): Promise<void> => {
    while (next < range.end) {
      const id = next++
      const response = await post(agent, url, token, JSON.stringify(seedPlant(id)))
      if (response.status !== 200) throw new Error(`seeding plant ${id}: ${response.status} ${response.body}`)
    }
  }
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  } finally {
    agent.destroy()
  }
  return (range.end - range.start) / ((performance.now() - started) / 1000)
}

/** GETs `path` and returns the body, failing on any status but 200. */
export function getText(url: string, token: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      let text = ''
      res.on('data', (chunk: Buffer) => (text += chunk.toString()))
      res.on('end', () =>
        res.statusCode === 200 ? resolve(text) : reject(new Error(`GET ${path}: ${res.statusCode} ${text}`)),
      )
    })
    req.once('error', reject)
    req.end()
  })
}
