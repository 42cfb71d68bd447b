/**
 * A load generator run as its own process (so the test process measuring latency is not the one busy sending):
 * `node --import tsx test/helpers/post-flood.ts BASE_URL TOKEN SECONDS CONCURRENCY FIRST_ID` POSTs plants with ids
 * from FIRST_ID on, CONCURRENCY requests in flight over keep-alive connections, for SECONDS, then prints
 * `{"statuses":{"200":n,...}}` on stdout.
 */
import { Agent, request } from 'node:http'

const [baseUrl, token, seconds, concurrency, firstId] = process.argv.slice(2)
const agent = new Agent({ keepAlive: true, maxSockets: Number(concurrency) })
const deadline = Date.now() + Number(seconds) * 1000
const statuses: Record<string, number> = {}
let nextId = BigInt(firstId!)

function post(id: bigint): Promise<number> {
  const body = `{"id":${id},"name":"spam"}`
  return new Promise((resolve) => {
    const req = request(`${baseUrl}/plants`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    })
    req.on('response', (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', () => resolve(0))
    req.end(body)
  })
}

async function loop(): Promise<void> {
  while (Date.now() < deadline) {
    const status = await post(nextId++)
    statuses[status] = (statuses[status] ?? 0) + 1
  }
}

await Promise.all(Array.from({ length: Number(concurrency) }, loop))
agent.destroy()
process.stdout.write(JSON.stringify({ statuses }) + '\n')
