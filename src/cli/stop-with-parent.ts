// npm runs `npx plantstore serve` (and any script that does not exec) through `sh -c`, and passes a SIGTERM it gets
// to that shell only: the shell dies and the server, re-parented, would go on serving with nobody left to stop it.

/** How often the parent is checked: a server outliving npm stops within about this long. */
const CHECK_MS = 500

/** True when a package manager's script runner started this process (npm start, npx, npm run, pnpm, yarn). */
export function startedByPackageManager(env: NodeJS.ProcessEnv): boolean {
  return env.npm_lifecycle_event !== undefined
}

/**
 * Sends this process SIGTERM once the process that started it is gone (this one re-parented), so that it stops the
 * way a SIGTERM stops it. Only for a process that npm started: one left running on purpose (nohup, setsid, `&` in a
 * shell that then exits) must keep serving.
 */
export function stopWithParent(): void {
  const parent = process.ppid
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    process.stderr.write(`plantstore: the process that started this one (pid ${parent}) is gone; stopping\n`)
    process.kill(process.pid, 'SIGTERM')
  }, CHECK_MS)
  // Never what keeps the process alive.
  timer.unref()
}
