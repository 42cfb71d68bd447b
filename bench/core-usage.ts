import { readFileSync } from 'node:fs'

/**
 * Busy and total jiffies of one CPU, from /proc/stat. Busy: user, nice, system and steal (a hypervisor taking the
 * core); not irq and softirq, which are loopback networking, the benchmark's own traffic.
 */
function coreJiffies(cpu: number): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').match(new RegExp(`^cpu${cpu} (.+)$`, 'm'))?.[1] ?? ''
  const fields = line.trim().split(/\s+/).map(Number)
  const [user = 0, nice = 0, system = 0, , , , , steal = 0] = fields
  return { busy: user + nice + system + steal, total: fields.slice(0, 8).reduce((sum, n) => sum + n, 0) }
}

/** CPU time of a process, all threads (utime + stime, in jiffies); fields start after the command's ')'. */
function processJiffies(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[11]) + Number(fields[12])
}

/**
 * How one core was used over a run, as shares 0..1: `own` by the process watched (the server: near 1 means it was
 * the bottleneck; or wrk), `other` by everything else (other processes, the database, kernel threads writing).
 */
export interface CoreShares {
  own: number
  other: number
}

/**
 * A core's use during a run, from /proc, for a process pinned there. The process's CPU time is sampled while it
 * runs, so one that exits at the end of the run (wrk) is still counted, all but its last 50 ms.
 */
export class CoreUsage {
  private core = { busy: 0, total: 0 }
  private pid: number | undefined
  private base = 0
  private own = 0
  private timer: NodeJS.Timeout | undefined

  constructor(private readonly cpu: number) {}

  start(): void {
    this.core = coreJiffies(this.cpu)
    this.timer = setInterval(() => this.sample(), 50)
  }

  /** Watches `pid` from now on; `fresh` for a process started after start(), so all its CPU time counts. */
  watch(pid: number, fresh = false): void {
    this.pid = pid
    this.base = fresh ? 0 : processJiffies(pid)
    this.own = 0
  }

  stop(): CoreShares {
    clearInterval(this.timer)
    this.sample()
    const core = coreJiffies(this.cpu)
    const elapsed = core.total - this.core.total
    if (elapsed <= 0) return { own: 0, other: 0 }
    const other = Math.max(0, core.busy - this.core.busy - this.own) / elapsed
    return { own: Math.min(1, this.own / elapsed), other }
  }

  private sample(): void {
    if (this.pid === undefined) return
    try {
      this.own = processJiffies(this.pid) - this.base
    } catch {
      // The process has exited: keep its last sample.
    }
  }
}
