/** The machine: where processes run (taskset), and what /proc says about cores and memory during a run. */
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { promisify } from 'node:util'

export const WRK = '/usr/bin/wrk'
const TASKSET = '/usr/bin/taskset'

/** Runs a process to its end: its stdout and stderr, as text; a failure rejects with them. */
export const run = promisify(execFile)

/** Where processes run: servers on one core, wrk and the harness on another, when the machine allows it. */
export type Pinning = ReturnType<typeof detectPinning>

export function detectPinning() {
  // The CPUs this process may use (a container may allow, say, 2-3 only).
  const list = readFileSync('/proc/self/status', 'utf8').match(/^Cpus_allowed_list:\s*(.+)$/m)?.[1] ?? ''
  const cpus = list.split(',').flatMap((part) => {
    const [from = NaN, to = from] = part.split('-').map(Number)
    return Number.isNaN(from) ? [] : Array.from({ length: to - from + 1 }, (_, i) => from + i)
  })
  const [serverCpu, loadCpu] = cpus
  const none = { serverCpu: undefined, loadCpu: undefined }
  if (!existsSync(TASKSET)) return { ...none, note: 'not pinned: taskset missing' }
  if (loadCpu === undefined) return { ...none, note: `not pinned: only CPU ${list} available` }
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

/** A file of /proc, '' once its process is gone. */
function proc(file: string): string {
  try {
    return readFileSync(`/proc/${file}`, 'utf8')
  } catch {
    return ''
  }
}

/** A process's peak resident memory in bytes (VmHWM), since it started or since resetPeakRss. */
export const peakRss = (pid: number) => Number(/^VmHWM:\s+(\d+) kB/m.exec(proc(`${pid}/status`))?.[1] ?? 0) * 1024

/** Writing "5" to a process's clear_refs resets its VmHWM, so VmHWM read after a run is that run's exact peak. */
export const resetPeakRss = (pid: number) => writeFileSync(`/proc/${pid}/clear_refs`, '5')

/**
 * Busy and total jiffies of one CPU, from /proc/stat. Busy: user, nice, system and steal (a hypervisor taking the
 * core); not irq and softirq, which are loopback networking, the benchmark's own traffic.
 */
function coreJiffies(cpu: number): { busy: number; total: number } {
  const line = proc('stat').match(new RegExp(`^cpu${cpu} (.+)$`, 'm'))?.[1] ?? ''
  const fields = line.trim().split(/\s+/).map(Number)
  const [user = 0, nice = 0, system = 0, , , , , steal = 0] = fields
  return { busy: user + nice + system + steal, total: fields.slice(0, 8).reduce((sum, n) => sum + n, 0) }
}

/** CPU time of a process, all threads (utime + stime), or of the children it has waited for (cutime + cstime). */
function cpuJiffies(pid: number, children = false): number {
  const stat = proc(`${pid}/stat`)
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[children ? 13 : 11] ?? 0) + Number(fields[children ? 14 : 12] ?? 0)
}

/** How one core was used over a run, as shares 0..1: by the process watched (`own`) and by everything else. */
export type CoreShares = { own: number; other: number }

/**
 * Watches the servers' core with the server `pid` on it and wrk's core with the harness's children (wrk, counted once
 * it has exited: taskset execs it, so it is the harness's child); stop() gives their shares. Undefined if not pinned.
 */
export function watchCores({ serverCpu, loadCpu }: Pinning, pid: number) {
  if (serverCpu === undefined || loadCpu === undefined) return undefined
  const owners = [() => cpuJiffies(pid), () => cpuJiffies(process.pid, true)]
  const start = [serverCpu, loadCpu].map((cpu, i) => ({ cpu, core: coreJiffies(cpu), own: owners[i]?.() ?? 0 }))
  return () => {
    const [server, load] = start.map(({ cpu, core, own }, i): CoreShares => {
      const [end, used] = [coreJiffies(cpu), Math.max(0, (owners[i]?.() ?? 0) - own)]
      const elapsed = Math.max(1, end.total - core.total)
      return { own: Math.min(1, used / elapsed), other: Math.max(0, end.busy - core.busy - used) / elapsed }
    }) as [CoreShares, CoreShares]
    return { server, load }
  }
}
