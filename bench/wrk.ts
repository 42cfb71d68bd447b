import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { pinned, run, WRK } from './machine.js'

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'wrk-script.lua')
const MARKER = 'PLANTSTORE_BENCH_RESULT '

/** What one wrk run measured. */
export interface WrkResult {
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** Responses with status 400 or above (wrk counts 3xx as success; the API sends none). */
  non2xx: number
  /** Connect, read, write and timeout errors. */
  socketErrors: number
}

/** Runs bench/wrk-script.lua (`env`: its settings) once, one thread: it suits a load generator pinned to one core. */
export async function runWrk(request: {
  url: string
  seconds: number
  connections: number
  cpu: number | undefined
  env: Record<string, string>
}): Promise<WrkResult> {
  // A timeout far above any healthy latency: a slow fsync must show in p99, not as a dropped request.
  const args = ['-t1', `-c${request.connections}`, `-d${request.seconds}s`, '--timeout', '10s', '-s', SCRIPT]
  const [command, commandArgs] = pinned(request.cpu, WRK, [...args, request.url])
  const { stdout } = await run(command, commandArgs, { env: { ...process.env, ...request.env } })
  const line = stdout.split('\n').find((l) => l.startsWith(MARKER))
  if (line === undefined) throw new Error(`wrk printed no result line:\n${stdout}`)
  type Keys = 'requests' | 'duration_us' | 'p50_us' | 'p99_us' | 'non2xx' | 'socket'
  const raw = JSON.parse(line.slice(MARKER.length)) as Record<Keys, number>
  const { requests, non2xx, socket } = raw
  const [rps, p50Ms, p99Ms] = [requests / (raw.duration_us / 1e6), raw.p50_us / 1000, raw.p99_us / 1000]
  return { requests, rps, p50Ms, p99Ms, non2xx, socketErrors: socket }
}
