// `npm run build` compiles src/ to dist/ and the typed client (clients/typescript/) to its dist/; `--if-changed` (npm
// start's prestart) compiles the service only, and only when a source or a tsconfig changed since the last build that
// succeeded, so an unchanged checkout starts without loading the compiler.
// Plain JavaScript: it runs before there is anything compiled, and without tsx.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json'].map((input) => join(ROOT, input))
// Written when a build succeeds, with the time it started: a build that fails leaves the old one (or none).
const STAMP = join(ROOT, 'dist', '.built')

/** The latest modification time under `path`; a folder's own counts, so that a file deleted or renamed counts. */
function newest(path) {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((entry) => newest(join(path, entry))))
}

function changed() {
  return !existsSync(STAMP) || Math.max(...INPUTS.map(newest)) > statSync(STAMP).mtimeMs
}

const ifChanged = process.argv.includes('--if-changed')
if (ifChanged && !changed()) process.exit(0)
/**
 * The compiler, a development dependency: an install without them (`npm ci --omit=dev`) has no way to build, and a
 * pruned install whose sources changed does not run a stale dist/ without a word.
 */
function compiler() {
  try {
    return createRequire(import.meta.url).resolve('typescript/bin/tsc')
  } catch {
    process.stderr.write(
      'plantstore: building needs the development dependencies (typescript is not installed); install for production with ' +
        '`npm ci --include=dev && npm run build && npm prune --omit=dev` (docs/operations.md, "Production install")\n',
    )
    process.exit(1)
  }
}
const tsc = compiler()

// One build at a time in a checkout: test files run at once each bring dist/ up to date, and two compilers writing
// the same files would hand each other's children half-written modules. The lock file holds its builder's pid, so
// one left by a build that was killed is taken over at once.
const LOCK = join(ROOT, 'dist', '.building')
const alive = (pid) => {
  try {
    return process.kill(pid, 0)
  } catch (err) {
    return err.code === 'EPERM'
  }
}
function lock() {
  mkdirSync(dirname(LOCK), { recursive: true })
  for (;;) {
    try {
      return writeFileSync(LOCK, String(process.pid), { flag: 'wx' })
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
    }
    let holder = 0
    try {
      holder = Number(readFileSync(LOCK, 'utf8'))
    } catch {
      continue // released meanwhile
    }
    // An empty file is a lock being written: its holder is alive.
    if (holder > 0 && !alive(holder)) rmSync(LOCK, { force: true })
    else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100)
  }
}

/** Compiles each project; the stamp only when all succeeded. 0, or 1 once tsc has printed its errors. */
function build() {
  const started = new Date()
  const projects = ['tsconfig.build.json']
  if (!ifChanged) projects.push(join('clients', 'typescript', 'tsconfig.build.json'))
  try {
    for (const project of projects) {
      execFileSync(process.execPath, [tsc, '-p', join(ROOT, project)], { cwd: ROOT, stdio: 'inherit' })
    }
  } catch {
    return 1
  }
  writeFileSync(STAMP, '')
  utimesSync(STAMP, started, started)
  return 0
}

lock()
let code = 0
try {
  // Another builder may have brought it up to date while this one waited.
  if (!ifChanged || changed()) code = build()
} finally {
  rmSync(LOCK, { force: true })
}
process.exit(code)
