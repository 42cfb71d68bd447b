import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import os from 'node:os'

export const WRK = '/usr/bin/wrk'
const TASKSET = '/usr/bin/taskset'

/** Where processes run: servers on one core, wrk and the harness on another, when the machine allows it. */
export interface Pinning {
  serverCpu: number | undefined
  loadCpu: number | undefined
  /** One line for the report. */
  note: string
}

/** Exits with the install hint when wrk is missing (it is the load generator; there is no fallback). */
export function requireWrk(): void {
  if (existsSync(WRK)) return
  process.stderr.write('bench: wrk not found at /usr/bin/wrk; install wrk: sudo apt-get install wrk\n')
  process.exit(1)
}

export function wrkVersion(): string {
  // wrk -v prints its version line and exits non-zero.
  const result = spawnSync(WRK, ['-v'], { encoding: 'utf8' })
  return (
    (result.stdout + result.stderr)
      .split('\n')[0]
      ?.replace(/ Copyright.*$/, '')
      .trim() ?? 'unknown'
  )
}

/** The CPUs this process may use (a container may allow, say, 2-3 only). */
function allowedCpus(): number[] {
  const line = readFileSync('/proc/self/status', 'utf8').match(/^Cpus_allowed_list:\s*(.+)$/m)?.[1] ?? ''
  return line.split(',').flatMap((part) => {
    const [from, to] = part.split('-').map(Number)
    if (from === undefined || Number.isNaN(from)) return []
    return Array.from({ length: (to ?? from) - from + 1 }, (_, i) => from + i)
  })
}

export function detectPinning(): Pinning {
  const cpus = allowedCpus()
  const [serverCpu, loadCpu] = cpus
  if (!existsSync(TASKSET)) return { serverCpu: undefined, loadCpu: undefined, note: 'not pinned: taskset missing' }
  if (serverCpu === undefined || loadCpu === undefined) {
    return { serverCpu: undefined, loadCpu: undefined, note: `not pinned: only CPU ${cpus.join(',')} available` }
  }
  return {
    serverCpu,
    loadCpu,
    note: `servers on CPU ${serverCpu}, wrk and the harness on CPU ${loadCpu} (taskset)`,
  }
}

/** The command line that runs `command` on `cpu` (unchanged when not pinning). */
export function pinned(cpu: number | undefined, command: string, args: string[]): [string, string[]] {
  return cpu === undefined ? [command, args] : [TASKSET, ['-c', String(cpu), command, ...args]]
}

/**
 * Moves the harness (all its threads) off the servers' core, so its sampling and the delete scenario's top-ups do
 * not steal from them. Children it starts afterwards inherit this; servers and wrk are pinned on their own.
 */
export function pinSelf(pinning: Pinning): void {
  if (pinning.loadCpu === undefined) return
  execFileSync(TASKSET, ['-a', '-p', '-c', String(pinning.loadCpu), String(process.pid)], { stdio: 'ignore' })
}

export function machineSummary(): string {
  const model = os.cpus()[0]?.model.trim() ?? 'unknown CPU'
  const memoryGb = (os.totalmem() / 2 ** 30).toFixed(0)
  return `${os.cpus().length} cores (${model}), ${memoryGb} GiB RAM, ${os.type()} ${os.release()}`
}
