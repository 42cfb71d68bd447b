// `npm run build` compiles src/ to dist/ and the typed client (clients/typescript/) to its dist/; `--if-changed` (npm
// start's prestart) compiles the service only, and only when a source or a tsconfig changed since the last build that
// succeeded, so an unchanged checkout starts without loading the compiler.
// Plain JavaScript: it runs before there is anything compiled, and without tsx.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
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

if (process.argv.includes('--if-changed') && !changed()) process.exit(0)
const started = new Date()
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
const projects = ['tsconfig.build.json']
if (!process.argv.includes('--if-changed')) projects.push(join('clients', 'typescript', 'tsconfig.build.json'))
try {
  for (const project of projects) {
    execFileSync(process.execPath, [tsc, '-p', join(ROOT, project)], { cwd: ROOT, stdio: 'inherit' })
  }
} catch {
  // tsc has printed its errors.
  process.exit(1)
}
writeFileSync(STAMP, '')
utimesSync(STAMP, started, started)
