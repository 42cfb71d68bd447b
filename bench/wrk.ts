import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { WRK, pinned } from './machine.js'

const LUA_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lua')
const MARKER = 'PLANTSTORE_BENCH_RESULT '

/**
 * One wrk run with a scenario script (bench/lua/; `env` its settings, see common.lua), one thread: it suits a load
 * generator pinned to one core.
 */
export interface WrkRequest {
  url: string
  lua: string
  seconds: number
  connections: number
  cpu: number | undefined
  env: Record<string, string>
}

/** What one wrk run measured; the thread's id counters tell the harness which ids were used. */
export interface WrkResult {
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** Responses with status 400 or above (wrk counts 3xx as success; the API sends none). */
  non2xx: number
  /** Connect, read, write and timeout errors. */
  socketErrors: number
  threads: Array<{ first: number; next: number; taken: number }>
}

function parseResult(stdout: string): WrkResult {
  const line = stdout.split('\n').find((l) => l.startsWith(MARKER))
  if (line === undefined) throw new Error(`wrk printed no result line:\n${stdout}`)
  const raw = JSON.parse(line.slice(MARKER.length)) as Record<string, number> & { threads: WrkResult['threads'] }
  return {
    requests: raw.requests!,
    rps: raw.requests! / (raw.duration_us! / 1e6),
    p50Ms: raw.p50_us! / 1000,
    p99Ms: raw.p99_us! / 1000,
    non2xx: raw.non2xx!,
    socketErrors: raw.connect! + raw.read! + raw.write! + raw.timeout!,
    threads: raw.threads,
  }
}

/** Runs wrk once and returns its measurements; `onSpawn` gets wrk's pid (taskset execs wrk: the same process). */
export function runWrk(request: WrkRequest, onSpawn?: (pid: number) => void): Promise<WrkResult> {
  // A timeout far above any healthy latency: a slow fsync must show in p99, not as a dropped request.
  const args = ['-t1', `-c${request.connections}`, `-d${request.seconds}s`, '--timeout', '10s']
  const [command, commandArgs] = pinned(request.cpu, WRK, [...args, '-s', path.join(LUA_DIR, request.lua), request.url])
  return new Promise((resolve, reject) => {
    const child = spawn(command, commandArgs, {
      env: { ...process.env, ...request.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
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
