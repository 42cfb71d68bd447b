// `npm test` (or `node scripts/test.js [FILE...]`): the test files (by default every *.test.ts under test/ and
// clients/typescript/test) in two runs of node:test, each file in a process of its own as node:test always runs them.
// First the files that can share the machine, PLANTSTORE_TEST_CONCURRENCY at a time (default 3: the files also wait
// on PostgreSQL, child processes and sockets, but mostly use CPU, so on two cores this saved about 20%, not 3×); then the files
// named in test/serial.txt, one at a time, because what they measure or provoke (CPU-bound floods, timing against a
// baseline, bursts of processes and sockets) would be disturbed by, or disturb, files beside them.
// Each run starts with a line `plantstore-test: run K of N: ...`; scripts/check-test-log.js checks every run's summary.
// Files start longest first, as long as they took at the last run on this checkout (PLANTSTORE_TEST_DURATIONS names
// where that is kept; by default node_modules/.cache/), so that no long file starts last beside idle slots; files
// without a time yet go first, then in path order. The order changes nothing else: each file is a process of its own.
// Exits 1 when either run failed (both always run). Plain JavaScript, so that it needs nothing compiled.
import { spawn } from 'node:child_process'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)))
const SERIAL_LIST = join(ROOT, 'test', 'serial.txt')
const DEFAULT_CONCURRENCY = 3
const DURATIONS_REPORTER = join(ROOT, 'scripts', 'test-durations-reporter.js')
const DURATIONS =
  process.env.PLANTSTORE_TEST_DURATIONS || join(ROOT, 'node_modules', '.cache', 'plantstore', 'test-durations.json')
// node:test's own choice of reporter, named because a second one (the durations) replaces the default.
const MAJOR = Number(process.versions.node.split('.')[0])
const DEFAULT_REPORTER = MAJOR >= 23 || process.stdout.isTTY ? 'spec' : 'tap'

/** Every *.test.ts under `dir` (a path from the repository's top folder), sorted. */
function testFiles(dir) {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.test.ts'))
    .map((entry) => relative(ROOT, join(entry.parentPath ?? entry.path, entry.name)))
}

/** The paths of a list like test/serial.txt: one a line, a `#` and the reason after it; comment lines start with `#`. */
export function listed(text) {
  return text
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter((line) => line !== '')
}

/** How many files run at once in the first run: PLANTSTORE_TEST_CONCURRENCY, a whole number from 1, or the default. */
export function concurrency(value) {
  if (value === undefined || value === '') return DEFAULT_CONCURRENCY
  if (!/^[1-9]\d*$/.test(value))
    throw new Error(`PLANTSTORE_TEST_CONCURRENCY must be a whole number from 1, not "${value}"`)
  return Number(value)
}

/** The runs to make: files beside each other (at `parallel` at a time), then the serial ones; empty runs left out. */
export function plan(files, serial, parallel) {
  const alone = new Set(serial)
  const runs = [
    { files: files.filter((file) => !alone.has(file)), concurrency: parallel, why: 'beside each other' },
    { files: files.filter((file) => alone.has(file)), concurrency: 1, why: 'one at a time (test/serial.txt)' },
  ]
  return runs.filter((run) => run.files.length > 0)
}

/** `files` longest first by `durations` (milliseconds by path from the top folder); files without one first. */
export function longestFirst(files, durations) {
  const time = (file) => durations[file] ?? Infinity
  return [...files].sort((a, b) => time(b) - time(a) || (a < b ? -1 : a > b ? 1 : 0))
}

/** The kept durations, by path from the top folder; none when there are none yet or they cannot be read. */
function readDurations() {
  try {
    return JSON.parse(readFileSync(DURATIONS, 'utf8'))
  } catch {
    return {}
  }
}

/** Keeps the durations a run's reporter wrote to `file` (absolute paths) beside the ones kept before. */
function keepDurations(file) {
  if (!existsSync(file)) return
  try {
    const measured = JSON.parse(readFileSync(file, 'utf8'))
    const kept = readDurations()
    for (const [path, ms] of Object.entries(measured)) kept[relative(ROOT, path)] = Math.round(ms)
    mkdirSync(dirname(DURATIONS), { recursive: true })
    // Renamed into place: a run beside this one reads the old file or the new one, never half of one.
    writeFileSync(`${DURATIONS}.${process.pid}`, JSON.stringify(kept, null, 1) + '\n')
    renameSync(`${DURATIONS}.${process.pid}`, DURATIONS)
  } catch (error) {
    console.error(`plantstore-test: could not keep the test durations in ${DURATIONS}: ${error.message}`)
  }
}

/** Runs node:test on `files`, `concurrency` at a time, with this process's output; resolves true when it passed. */
function runTests(files, concurrency) {
  const measured = join(mkdtempSync(join(tmpdir(), 'plantstore-test-')), 'durations.json')
  const reporters = [`--test-reporter=${DEFAULT_REPORTER}`, '--test-reporter-destination=stdout']
  reporters.push(`--test-reporter=${DURATIONS_REPORTER}`, `--test-reporter-destination=${measured}`)
  const args = ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...reporters, ...files]
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: 'inherit' })
  // A stop of this runner stops the run it waits on, so that no test process outlives it.
  const stop = (signal) => child.kill(signal)
  process.on('SIGINT', stop).on('SIGTERM', stop)
  return new Promise((resolvePassed) =>
    child.on('exit', (code) => {
      process.off('SIGINT', stop).off('SIGTERM', stop)
      keepDurations(measured)
      rmSync(dirname(measured), { recursive: true, force: true })
      resolvePassed(code === 0)
    }),
  )
}

async function main() {
  const given = process.argv.slice(2).map((file) => relative(ROOT, resolve(file)))
  const files = given.length > 0 ? given : [...testFiles('test'), ...testFiles('clients/typescript/test')].sort()
  const ordered = longestFirst(files, readDurations())
  const runs = plan(
    ordered,
    listed(readFileSync(SERIAL_LIST, 'utf8')),
    concurrency(process.env.PLANTSTORE_TEST_CONCURRENCY),
  )
  let passed = true
  for (const [i, run] of runs.entries()) {
    const count = `${run.files.length} file${run.files.length === 1 ? '' : 's'}`
    console.log(`plantstore-test: run ${i + 1} of ${runs.length}: ${count}, ${run.why}, ${run.concurrency} at a time`)
    passed = (await runTests(run.files, run.concurrency)) && passed
  }
  process.exitCode = passed ? 0 : 1
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(`plantstore-test: ${error.message}`)
    process.exitCode = 2
  })
}
