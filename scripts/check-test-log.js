// `node scripts/check-test-log.js LOG`: fails (exit 1, saying why on stderr) unless LOG, the output of one `npm test`,
// shows a whole run with no test failed, cancelled, skipped or todo. The runner's summary is not enough: it does not
// count a skipped or todo `describe` (Node 20 prints `# SKIP` for it and still `skipped 0`), so every result line is
// read for the markers as well. Both of node:test's reporters are read: spec (the default on a terminal, and on Node 23
// and later everywhere) and TAP (Node 20 and 22 when the output is not a terminal, as under `npm test | tee`).
// Plain JavaScript: .ci/run runs it with each Node line it tests, before anything is compiled and without tsx.
import { readFileSync } from 'node:fs'

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

/** Why `log` is not a clean run: one line per problem, none when it is. */
function problems(log) {
  const lines = log.replace(ANSI, '').split(/\r?\n/)
  const found = []
  for (const line of lines)
    if (TAP_MARKER.test(line) || SPEC_SKIP.test(line) || SPEC_MARKER.test(line))
      found.push(`skipped or todo: ${line.trim()}`)

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

const [file] = process.argv.slice(2)
if (file === undefined) {
  console.error('usage: node scripts/check-test-log.js LOG')
  process.exit(2)
}
const found = problems(readFileSync(file, 'utf8'))
for (const problem of found) console.error(`check-test-log: ${file}: ${problem}`)
process.exit(found.length === 0 ? 0 : 1)
