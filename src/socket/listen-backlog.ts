import { readFileSync } from 'node:fs'

const SOMAXCONN = '/proc/sys/net/core/somaxconn'

/**
 * The longest listen queue the kernel grants, `net.core.somaxconn`: Linux cuts a longer backlog down to it without a
 * word. Undefined where it cannot be read (not Linux).
 */
export function kernelBacklogCap(file = SOMAXCONN): number | undefined {
  try {
    const value = Number(readFileSync(file, 'utf8').trim())
    return Number.isSafeInteger(value) && value > 0 ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * What to warn about when the kernel grants a shorter listen queue than `backlog` asks for, else undefined: a burst
 * of more new connections than the kernel's cap then drops some (anyone's), and their clients wait 1 s or more.
 */
export function shortBacklogWarning(
  backlog: number,
  cap: number | undefined,
): { fields: Record<string, number>; message: string } | undefined {
  if (cap === undefined || cap >= backlog) return undefined
  return {
    fields: { backlog, somaxconn: cap },
    message:
      `the kernel keeps at most ${cap} new connections waiting (net.core.somaxconn), not HTTP_LISTEN_BACKLOG's ` +
      `${backlog}: a burst of more drops connection attempts, which wait 1 s to be sent again; ` +
      `raise it (sysctl -w net.core.somaxconn=${backlog}) or lower HTTP_LISTEN_BACKLOG`,
  }
}
