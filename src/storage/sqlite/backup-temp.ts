/*
 * The temporary file a backup is written into, beside its target, and what a backup killed outright (SIGKILL, a
 * crash, a power cut) left of one: that file and the rollback journal VACUUM INTO keeps beside it, each as large as
 * the store. Their names carry the writer's host and process id, so that a later backup to the same target can tell
 * a dead writer's files from a running one's and remove them; nothing else would.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, openSync, readdirSync, rmSync } from 'node:fs'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { BackupFailedError } from '../types.js'

/** This host's name as it appears in a temporary file's name: letters, digits and dashes. */
const HOST = hostname().replace(/[^A-Za-z0-9-]/g, '-') || 'localhost'

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** `<target>.<pid>-<host>.<12 hex>.tmp`, and its `-journal`: the pid and host of the process writing it. */
function tempPattern(target: string): RegExp {
  return new RegExp(`^${escaped(basename(target))}\\.(\\d+)-([A-Za-z0-9-]+)\\.[0-9a-f]{12}\\.tmp(-journal)?$`)
}

/** Whether process `pid` of this host is running (one of another user counts: it may not be signalled, but is). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as { code?: unknown }).code === 'EPERM'
  }
}

/**
 * Removes the temporary files (and journals) of earlier backups to `target` whose process is gone; returns their
 * paths. Only this host's: a process of another host sharing the folder (NFS) cannot be checked from here. A pid
 * reused since by another process keeps its files until that one ends too: left, never wrongly removed.
 */
export function removeStaleTemps(target: string): string[] {
  const folder = dirname(target)
  const pattern = tempPattern(target)
  let names: string[]
  try {
    names = readdirSync(folder)
  } catch {
    // No folder, or none to read: creating the temporary file says why.
    return []
  }
  const stale = names.filter((name) => {
    const match = pattern.exec(name)
    if (match === null || match[2] !== HOST) return false
    const pid = Number(match[1])
    return pid !== process.pid && !running(pid)
  })
  for (const name of stale) rmSync(join(folder, name), { force: true })
  return stale.map((name) => join(folder, name))
}

/** Creates the empty temporary file next to `target`, readable by its owner only: a backup holds webhook secrets. */
export function createTemp(target: string): string {
  const name = `${basename(target)}.${process.pid}-${HOST}.${randomBytes(6).toString('hex')}.tmp`
  const temp = join(dirname(target), name)
  try {
    closeSync(openSync(temp, 'wx', 0o600))
  } catch (err) {
    const code = (err as { code?: unknown }).code
    if (code === 'ENOENT') throw new BackupFailedError(`no folder ${dirname(target)}`)
    throw new BackupFailedError(`cannot create a file in ${dirname(target)}: ${(err as Error).message}`)
  }
  return temp
}
