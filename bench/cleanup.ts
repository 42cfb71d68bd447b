import type { ChildProcess } from 'node:child_process'

/**
 * What must be undone however the run ends (servers, temp files, the PostgreSQL schema): run in reverse order,
 * once, on success, on error and on Ctrl-C. Children also get SIGKILL from an 'exit' hook, the last resort
 * when the harness dies without running the async steps.
 */
export class Cleanup {
  private readonly steps: Array<{ name: string; run: () => Promise<void> | void }> = []
  private readonly children = new Set<ChildProcess>()
  private running: Promise<void> | undefined

  constructor() {
    process.on('exit', () => {
      for (const child of this.children) if (child.exitCode === null) child.kill('SIGKILL')
    })
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        process.stderr.write(`\nbench: ${signal}, cleaning up\n`)
        void this.run().finally(() => process.exit(130))
      })
    }
  }

  add(name: string, run: () => Promise<void> | void): void {
    this.steps.push({ name, run })
  }

  /** A child to SIGKILL if the harness exits while it still runs. */
  track(child: ChildProcess): void {
    this.children.add(child)
    child.once('exit', () => this.children.delete(child))
  }

  run(): Promise<void> {
    this.running ??= this.runSteps()
    return this.running
  }

  private async runSteps(): Promise<void> {
    for (const step of this.steps.reverse()) {
      try {
        await step.run()
      } catch (err) {
        process.stderr.write(`bench: cleanup "${step.name}" failed: ${(err as Error).message}\n`)
      }
    }
  }
}

/** Waits for every promise to settle before throwing the first failure, so cleanup knows every server and schema. */
export async function settleAll<T>(promises: Array<Promise<T>>): Promise<T[]> {
  const settled = await Promise.allSettled(promises)
  const failed = settled.find((result) => result.status === 'rejected')
  if (failed) throw failed.reason
  return Promise.all(promises)
}
