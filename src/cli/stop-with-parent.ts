import { readFileSync } from 'node:fs'

// npm runs `npx plantstore serve` (and any script that does not exec) through `sh -c`, and passes a SIGTERM it gets
// to that shell only: the shell dies and the server, re-parented, would go on serving with nobody left to stop it.

/** How often the parent is checked: a server outliving npm stops within about this long. */
const CHECK_MS = 500

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ash'])
// What in a shell's command says the process it starts is meant to outlive it.
const DETACHING = /&|\bnohup\b|\bsetsid\b|\bdisown\b/

/** A process's command line (Linux /proc), or undefined where it cannot be read. */
function commandLine(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1)
  } catch {
    return undefined
  }
}

const base = (path: string) => path.slice(path.lastIndexOf('/') + 1)

/**
 * True when a package manager's script runner started this process (npm start, npx, npm run, pnpm, yarn) and its
 * parent is that runner or the runner's plain `sh -c` for it. A server started inside a script to outlive it
 * (`nohup … &`, `setsid`) has the script's environment too, but a parent shell whose command detaches it: it must
 * keep serving once that shell exits. Where the parent's command line cannot be read (not Linux), false.
 */
export function startedByPackageManager(env: NodeJS.ProcessEnv, parent = commandLine(process.ppid)): boolean {
  if (env.npm_lifecycle_event === undefined || parent === undefined || parent.length === 0) return false
  const [program, flag, script] = parent
  if (SHELLS.has(base(program!))) return flag === '-c' && script !== undefined && !DETACHING.test(script)
  return parent.some((arg) => /^(npm|npx|pnpm|yarn)(-cli\.js|\.js|\.cjs)?$/.test(base(arg)))
}

/**
 * Sends this process SIGTERM once the process that started it is gone (this one re-parented), so that it stops the
 * way a SIGTERM stops it. Only for a process that npm started: one left running on purpose (nohup, setsid, `&` in a
 * shell that then exits) must keep serving.
 */
export function stopWithParent(): void {
  const parent = process.ppid
  // Said at start, before listening: whoever wonders why the server stopped (or why it did not) can read which it does.
  process.stderr.write(`plantstore: started by a package manager: stops once its parent (pid ${parent}) is gone\n`)
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    process.stderr.write(`plantstore: the process that started this one (pid ${parent}) is gone; stopping\n`)
    process.kill(process.pid, 'SIGTERM')
  }, CHECK_MS)
  // Never what keeps the process alive.
  timer.unref()
}
