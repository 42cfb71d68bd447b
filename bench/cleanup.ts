import type { ChildProcess } from 'node:child_process'

/**
 * What must be undone however the run ends (servers, temp files, the PostgreSQL schemas): run in reverse order,
 * once, on success, on error and on Ctrl-C. Children also get SIGKILL from an 'exit' hook, the last resort
 * when the harness dies without running the async steps.
 */
export class Cleanup {
  private readonly steps: Array<{ name: string; run: () => unknown }> = []
  private readonly children = new Set<ChildProcess>()
  private running: Promise<void> | undefined

  constructor() {
    process.on('exit', () => this.children.forEach((child) => child.exitCode === null && child.kill('SIGKILL')))
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        process.stderr.write(`\nbench: ${signal}, cleaning up\n`)
        void this.run().finally(() => process.exit(130))
      })
    }
  }

  add(name: string, run: () => unknown): void {
    this.steps.push({ name, run })
  }

  /** A child to SIGKILL if the harness exits while it still runs. */
  track(child: ChildProcess): void {
    this.children.add(child)
    child.once('exit', () => this.children.delete(child))
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of this.steps.reverse()) {
        await Promise.resolve()
          .then(step.run)
          .catch((err: Error) => process.stderr.write(`bench: cleanup "${step.name}" failed: ${err.message}\n`))
      }
    })()
    return this.running
  }
}

/** Waits for every promise to settle before throwing the first failure, so cleanup knows every server and schema. */
export async function settleAll<T>(promises: Array<Promise<T>>): Promise<T[]> {
  const settled = await Promise.allSettled(promises)
  const failed = settled.find((result) => result.status === 'rejected')
  if (failed) throw failed.reason
  return Promise.all(promises)
}
