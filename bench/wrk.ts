import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { WRK, pinned } from './machine.js'

const LUA_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lua')
const MARKER = 'PLANTSTORE_BENCH_RESULT '

export interface WrkRequest {
  url: string
  /** Script under bench/lua/. */
  lua: string
  seconds: number
  connections: number
  threads: number
  cpu: number | undefined
  /** Settings for the script (see bench/lua/common.lua). */
  env: Record<string, string>
}

/** What one wrk run measured; per-thread id counters let the harness know which ids were used. */
export interface WrkResult {
  requests: number
  seconds: number
  rps: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  maxMs: number
  /** Responses with status 400 or above (wrk counts 3xx as success; the API sends none). */
  non2xx: number
  /** Connect, read, write and timeout errors. */
  socketErrors: number
  threads: Array<{ first: number; next: number; taken: number }>
}

interface LuaResult {
  requests: number
  duration_us: number
  non2xx: number
  connect: number
  read: number
  write: number
  timeout: number
  p50_us: number
  p90_us: number
  p99_us: number
  max_us: number
  threads: WrkResult['threads']
}

function parseResult(stdout: string): WrkResult {
  const line = stdout.split('\n').find((l) => l.startsWith(MARKER))
  if (line === undefined) throw new Error(`wrk printed no result line:\n${stdout}`)
  const raw = JSON.parse(line.slice(MARKER.length)) as LuaResult
  const seconds = raw.duration_us / 1e6
  return {
    requests: raw.requests,
    seconds,
    rps: raw.requests / seconds,
    p50Ms: raw.p50_us / 1000,
    p90Ms: raw.p90_us / 1000,
    p99Ms: raw.p99_us / 1000,
    maxMs: raw.max_us / 1000,
    non2xx: raw.non2xx,
    socketErrors: raw.connect + raw.read + raw.write + raw.timeout,
    threads: raw.threads,
  }
}

/** Runs wrk once with a scenario script and returns its measurements; `onSpawn` gets wrk's pid. */
export function runWrk(request: WrkRequest, onSpawn?: (pid: number) => void): Promise<WrkResult> {
  const args = [
    `-t${request.threads}`,
    `-c${request.connections}`,
    `-d${request.seconds}s`,
    // Far above any healthy latency: a slow fsync must show in p99, not as a dropped request.
    '--timeout',
    '10s',
    '-s',
    path.join(LUA_DIR, request.lua),
    request.url,
  ]
  const [command, commandArgs] = pinned(request.cpu, WRK, args)
  return new Promise((resolve, reject) => {
    const child = spawn(command, commandArgs, {
      env: { ...process.env, ...request.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    // taskset execs wrk, so this pid is wrk's own.
    if (child.pid !== undefined) onSpawn?.(child.pid)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`wrk exited with ${code}: ${stderr || stdout}`))
      try {
        resolve(parseResult(stdout))
      } catch (err) {
        reject(err)
      }
    })
  })
}
