// `node scripts/check-test-log.js LOG`: fails (exit 1, saying why on stderr) unless LOG, the output of one `npm test`
// (or of one node:test run), shows whole runs with no test failed, cancelled, skipped or todo. `npm test` makes two
// runs (scripts/test.js), each begun by a line `plantstore-test: run K of N`: each must be there and end clean. The runner's summary is not enough: it does not
// count a skipped or todo `describe` (Node 20 prints `# SKIP` for it and still `skipped 0`), so every result line is
// read for the markers as well. Both of node:test's reporters are read: spec (the default on a terminal, and on Node 23
// and later everywhere) and TAP (Node 20 and 22 when the output is not a terminal, as under `npm test | tee`).
// Plain JavaScript: .ci/run runs it with each Node line it tests, before anything is compiled and without tsx.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

// Colours, in case the log was written with FORCE_COLOR.
const ANSI = /\x1b\[[0-9;]*m/g
// TAP: `ok 4 - name # SKIP reason` (or `# TODO`), indented for subtests; a `#` in a name is escaped as `\#`.
const TAP_MARKER = /^\s*(?:not )?ok \d+ - (?:[^#\\]|\\.)*# (?:SKIP|TODO)\b/i
// Spec: a skipped test or suite gets the symbol `﹣`; a todo one `✔`, `✖` or `⚠` with ` # reason` (or `# TODO`) after
// its duration (and after a `(passed on attempt N)`, where the runner retries).
const SPEC_SKIP = /^\s*﹣ /
const SPEC_MARKER = /^\s*[✔✖⚠] .* \(\d[\d.e+-]*ms\)(?: \([^)]*\))* # (?!EXPECTED FAILURE$)/
// The closing summary, one count a line: `ℹ tests 12` (spec) or `# tests 12` (TAP).
const SUMMARY = /^(?:ℹ|#) (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)$/
const MUST_BE_ZERO = ['fail', 'cancelled', 'skipped', 'todo']

// scripts/test.js's line before each of its runs.
const RUN = /^plantstore-test: run (\d+) of (\d+):/

/** Why `log` is not a clean run: one line per problem, none when it is. */
export function problems(log) {
  const lines = log.replace(ANSI, '').split(/\r?\n/)
  const found = []
  for (const line of lines)
    if (TAP_MARKER.test(line) || SPEC_SKIP.test(line) || SPEC_MARKER.test(line))
      found.push(`skipped or todo: ${line.trim()}`)
  const starts = lines.flatMap((line, i) => (RUN.test(line) ? [i] : []))
  if (starts.length === 0) return [...found, ...summaryProblems(lines)]
  const total = Number(RUN.exec(lines[starts[0]])[2])
  if (starts.length !== total) found.push(`${starts.length} of ${total} runs began`)
  starts.forEach((start, k) => {
    const [, number, of] = RUN.exec(lines[start])
    if (Number(number) !== k + 1 || Number(of) !== total) found.push(`run ${number} of ${of} out of order`)
    const run = lines.slice(start + 1, starts[k + 1] ?? lines.length)
    found.push(...summaryProblems(run).map((problem) => `run ${number}: ${problem}`))
  })
  return found
}

/** Why the summary closing `lines` (one node:test run's output) is not a clean one. */
function summaryProblems(lines) {
  const found = []
  // The runner prints its summary last; a test's own output could hold a line like it, so the last block counts.
  const start = lines.findLastIndex((line) => SUMMARY.exec(line)?.[1] === 'tests')
  if (start === -1) return [...found, 'no summary: the run did not finish (or this is not node:test output)']
  const counts = new Map()
  for (const line of lines.slice(start)) {
    const match = SUMMARY.exec(line)
    if (match) counts.set(match[1], Number(match[2]))
  }
  for (const key of ['tests', 'pass', ...MUST_BE_ZERO])
    if (!counts.has(key)) found.push(`no "${key}" count in the summary`)
  for (const key of MUST_BE_ZERO) if (counts.get(key) > 0) found.push(`summary: ${key} ${counts.get(key)}`)
  if (counts.get('tests') === 0) found.push('summary: tests 0 (no test ran)')
  else if (counts.has('pass') && counts.get('pass') !== counts.get('tests'))
    found.push(`summary: pass ${counts.get('pass')} of tests ${counts.get('tests')}`)
  return found
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file] = process.argv.slice(2)
  if (file === undefined) {
    console.error('usage: node scripts/check-test-log.js LOG')
    process.exit(2)
  }
  const found = problems(readFileSync(file, 'utf8'))
  for (const problem of found) console.error(`check-test-log: ${file}: ${problem}`)
  process.exit(found.length === 0 ? 0 : 1)
}
