import { readFileSync } from 'node:fs'

/** Busy and total jiffies of one CPU, from /proc/stat. */
function coreJiffies(cpu: number): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').match(new RegExp(`^cpu${cpu} (.+)$`, 'm'))?.[1] ?? ''
  const fields = line.trim().split(/\s+/).map(Number)
  // user nice system idle iowait irq softirq steal (guest time is inside user). Busy: user, nice, system and
  // steal (a hypervisor taking the core). Not irq and softirq: loopback networking, the benchmark's own traffic.
  const [user = 0, nice = 0, system = 0, , , , , steal = 0] = fields
  const total = fields.slice(0, 8).reduce((sum, n) => sum + n, 0)
  return { busy: user + nice + system + steal, total }
}

/** CPU time of a process, all threads (utime + stime, in jiffies). */
function processJiffies(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name may hold spaces: fields start after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[11]) + Number(fields[12])
}

/** Shares of the server's core over a run, 0..1. */
export interface CoreShares {
  /**
   * The server's own CPU time: near 1 means the server was the bottleneck; well below means something else was
   * (the load generator, or waiting for the disk or the database).
   */
  server: number
  /**
   * Everything else busy on that core: other processes (on a shared machine, how far to trust a figure), the
   * database's processes when they land there, kernel threads writing to disk.
   */
  other: number
}

/** How the server's core was used during a run, from /proc (the server is pinned there). */
export class CoreUsage {
  private core = { busy: 0, total: 0 }
  private own = 0

  constructor(
    private readonly cpu: number,
    private readonly pid: number,
  ) {}

  start(): void {
    this.core = coreJiffies(this.cpu)
    this.own = processJiffies(this.pid)
  }

  stop(): CoreShares {
    const core = coreJiffies(this.cpu)
    const own = processJiffies(this.pid) - this.own
    const elapsed = core.total - this.core.total
    if (elapsed <= 0) return { server: 0, other: 0 }
    return { server: Math.min(1, own / elapsed), other: Math.max(0, core.busy - this.core.busy - own) / elapsed }
  }
}
