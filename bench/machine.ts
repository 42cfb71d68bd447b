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

/** Exits with the install hint when wrk, the load generator, is missing. */
export function requireWrk(): void {
  if (existsSync(WRK)) return
  process.stderr.write('bench: wrk not found at /usr/bin/wrk; install wrk: sudo apt-get install wrk\n')
  process.exit(1)
}

/** wrk -v prints its version line (and exits non-zero). */
export function wrkVersion(): string {
  const result = spawnSync(WRK, ['-v'], { encoding: 'utf8' })
  return (
    (result.stdout + result.stderr)
      .split('\n')[0]
      ?.replace(/ Copyright.*$/, '')
      .trim() ?? 'unknown'
  )
}

export function detectPinning(): Pinning {
  // The CPUs this process may use (a container may allow, say, 2-3 only).
  const list = readFileSync('/proc/self/status', 'utf8').match(/^Cpus_allowed_list:\s*(.+)$/m)?.[1] ?? ''
  const cpus = list.split(',').flatMap((part) => {
    const [from, to] = part.split('-').map(Number)
    if (from === undefined || Number.isNaN(from)) return []
    return Array.from({ length: (to ?? from) - from + 1 }, (_, i) => from + i)
  })
  const [serverCpu, loadCpu] = cpus
  const none = { serverCpu: undefined, loadCpu: undefined }
  if (!existsSync(TASKSET)) return { ...none, note: 'not pinned: taskset missing' }
  if (serverCpu === undefined || loadCpu === undefined)
    return { ...none, note: `not pinned: only CPU ${list} available` }
  return { serverCpu, loadCpu, note: `servers on CPU ${serverCpu}, wrk and the harness on CPU ${loadCpu} (taskset)` }
}

/** The command line that runs `command` on `cpu` (unchanged when not pinning). */
export function pinned(cpu: number | undefined, command: string, args: string[]): [string, string[]] {
  return cpu === undefined ? [command, args] : [TASKSET, ['-c', String(cpu), command, ...args]]
}

/** Moves the harness (all its threads, and the children it starts later) off the servers' core. */
export function pinSelf(pinning: Pinning): void {
  if (pinning.loadCpu === undefined) return
  execFileSync(TASKSET, ['-a', '-p', '-c', String(pinning.loadCpu), String(process.pid)], { stdio: 'ignore' })
}

export function machineSummary(): string {
  const model = os.cpus()[0]?.model.trim() ?? 'unknown CPU'
  return `${os.cpus().length} cores (${model}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, ${os.type()} ${os.release()}`
}
