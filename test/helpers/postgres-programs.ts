import { execFile, execFileSync, spawnSync } from 'node:child_process'
import { chownSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'

// The PostgreSQL server programs, where pg_config says (Debian: /usr/lib/postgresql/<version>/bin), for tests that
// run PostgreSQL servers of their own in temporary folders.
const BIN = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout?.trim() ?? ''

// PostgreSQL refuses to run as root: then it runs as the postgres user.
const asRoot = process.getuid?.() === 0
const runAs = asRoot ? ['runuser', '-u', 'postgres', '--'] : []

/** Those of `programs` that are missing (all of them when pg_config is). */
export function missingServerPrograms(programs: readonly string[]): string[] {
  return programs.filter((program) => BIN === '' || !existsSync(join(BIN, program)))
}

/** Runs a PostgreSQL program; asynchronously, so a test's clients keep sending meanwhile. */
export async function pg(program: string, ...args: string[]): Promise<void> {
  const [command, ...rest] = [...runAs, join(BIN, program), ...args]
  await promisify(execFile)(command!, rest)
}

/** Gives `dir` to the user the servers run as (postgres, when the tests run as root). */
export function ownForServers(dir: string): void {
  if (!asRoot) return
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }))
  chownSync(dir, id('-u'), id('-g'))
}

// The servers are stopped and started again on their ports: restartablePort, outside the ephemeral range.
export { restartablePort as freePort } from './free-port.js'
