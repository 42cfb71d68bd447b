import { readFileSync, writeFileSync } from 'node:fs'

/** A memory figure of /proc/PID/status, in kB (0 when absent). */
export function statusKb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const match = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))
  return match ? Number(match[1]) : 0
}

/**
 * Peak resident memory of a process over one run. Writing "5" to its clear_refs resets its VmHWM, so VmHWM read at
 * the end is the run's exact peak; where that is not allowed, VmRSS is sampled instead (and may miss spikes).
 */
export class PeakRss {
  private sampled = 0
  private timer: NodeJS.Timeout | undefined
  private reset = false

  constructor(private readonly pid: number) {}

  start(): void {
    try {
      writeFileSync(`/proc/${this.pid}/clear_refs`, '5')
      this.reset = true
    } catch {
      this.timer = setInterval(() => this.sample(), 100)
    }
    this.sample()
  }

  /** The peak in bytes. */
  stop(): number {
    clearInterval(this.timer)
    this.sample()
    return (this.reset ? Math.max(this.sampled, statusKb(this.pid, 'VmHWM')) : this.sampled) * 1024
  }

  private sample(): void {
    try {
      this.sampled = Math.max(this.sampled, statusKb(this.pid, 'VmRSS'))
    } catch {
      // The process is gone; the run reports its errors elsewhere.
    }
  }
}
