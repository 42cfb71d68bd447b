/**
 * Runs each test of the given files alone, as `--test-name-pattern='^name$'` does, and reports every test that fails
 * alone, matched no test or matched several: a test must not need the tests before it in its file.
 *
 *   nice -n 19 node --import tsx scripts/each-test-alone.ts test/a.test.ts test/b.test.ts
 *
 * Each file is listed first by a whole run, which must pass: Node 22 and later leave a test the name pattern filters
 * out of the report (Node 20 reports it skipped), so only a run of every test names them all on every release line.
 * Node 20 matches the pattern against a test's own name or any ancestor's, never the joined path, so a test whose
 * name repeats in another describe (one per backend, say) runs along with its namesakes: each still runs without
 * the tests before it in its describe. The spec output of every run is kept in a temporary directory.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve as absolute } from 'node:path'
import { fileURLToPath } from 'node:url'

const REPORTER = fileURLToPath(new URL('./each-test-alone-reporter.js', import.meta.url))
const NOT_MATCHED = 'test name does not match pattern'
const RUN_TIMEOUT_MS = Number(process.env.EACH_TEST_ALONE_TIMEOUT_MS ?? 20 * 60_000)

/** One line of scripts/each-test-alone-reporter.js: a finished test or suite. */
export interface ReportedTest {
  name: string
  nesting: number
  suite: boolean
  outcome: 'pass' | 'fail' | 'skip' | 'todo'
  reason?: string
  error?: string
}

export interface TestNode extends ReportedTest {
  path: string[]
  children: TestNode[]
}

/** The reporter's lines as a tree: the runner reports children before their parent, one nesting level deeper. */
export function buildTree(lines: ReportedTest[]): TestNode[] {
  const pending = new Map<number, TestNode[]>()
  for (const line of lines) {
    const node: TestNode = { ...line, path: [], children: pending.get(line.nesting + 1) ?? [] }
    pending.delete(line.nesting + 1)
    pending.set(line.nesting, [...(pending.get(line.nesting) ?? []), node])
  }
  const roots = pending.get(0) ?? []
  const setPaths = (nodes: TestNode[], prefix: string[]) => {
    for (const node of nodes) {
      node.path = [...prefix, node.name]
      setPaths(node.children, node.path)
    }
  }
  setPaths(roots, [])
  return roots
}

/** The tests a name pattern can pick: those at the top or in a describe (a subtest runs with its parent). */
export function selectable(nodes: TestNode[], inSuite = true): TestNode[] {
  return nodes.flatMap((node) => [...(!node.suite && inSuite ? [node] : []), ...selectable(node.children, node.suite)])
}

/** `^name$` with the name's regular-expression characters escaped. */
export const exactPattern = (name: string) => `^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`

interface Run {
  tree: TestNode[]
  code: number | null
  log: string
  ms: number
}

let runs = 0
let logDir: string | undefined

/** Runs `file`, only the tests `pattern` names when given. */
function runFile(file: string, pattern?: string): Promise<Run> {
  logDir ??= mkdtempSync(join(tmpdir(), 'each-test-alone-'))
  const log = join(logDir, `${++runs}.log`)
  const args = ['--import', 'tsx', '--test', '--test-concurrency=1']
  if (pattern !== undefined) args.push(`--test-name-pattern=${pattern}`)
  args.push(`--test-reporter=${REPORTER}`, '--test-reporter-destination=stdout')
  args.push('--test-reporter=spec', `--test-reporter-destination=${log}`, file)
  const started = Date.now()
  return new Promise((resolve, reject) => {
    // Run under a test runner (its own test does), the child would otherwise report to that runner, not to ours.
    const env = { ...process.env, NODE_TEST_CONTEXT: undefined }
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS)
    child.once('error', reject)
    child.once('close', (code) => {
      clearTimeout(timer)
      if (err !== '') writeFileSync(`${log}.stderr`, err)
      const lines = out
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as ReportedTest)
      // Node 22 and later report a file none of whose tests ran as one test named after the file: no test of it.
      const tree = buildTree(lines).filter((node) => node.suite || absolute(node.name) !== absolute(file))
      resolve({ tree, code, log, ms: Date.now() - started })
    })
  })
}

const flatten = (nodes: TestNode[]): TestNode[] => nodes.flatMap((node) => [node, ...flatten(node.children)])
const title = (node: TestNode) => node.path.join(' > ')
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`

/** Runs every selectable test of `file` alone; returns how many problems it reported. */
async function checkFile(file: string): Promise<number> {
  const listing = await runFile(file)
  const tests = selectable(listing.tree)
  console.log(`${file}: ${tests.length} tests, listed in ${seconds(listing.ms)}`)
  if (tests.length === 0 || listing.code !== 0) {
    console.log(`  LISTING FAILED (exit ${listing.code}): ${listing.log}`)
    return 1
  }
  let problems = 0
  const done = new Set<string>()
  for (const test of tests) {
    // Namesakes run together (see above): one run covers them all.
    if (done.has(test.name)) continue
    done.add(test.name)
    let run = await runFile(file, exactPattern(test.name))
    let failed = flatten(run.tree).filter((node) => node.outcome === 'fail')
    // Once more on a failure: a test that fails alone every time needs what an earlier test did; one that passes on
    // the retry is slow or flaky here (a busy machine), which is worth knowing but is another problem.
    let retry = ''
    if (failed.length > 0 || run.code !== 0) {
      const first = run
      run = await runFile(file, exactPattern(test.name))
      failed = flatten(run.tree).filter((node) => node.outcome === 'fail')
      if (failed.length === 0 && run.code === 0) {
        retry = `FAILED ALONE ONCE, PASSED ON THE RETRY (first run: ${first.log})`
        run = first
        failed = flatten(run.tree).filter((node) => node.outcome === 'fail')
      }
    }
    const ran = selectable(run.tree).filter((node) => node.outcome !== 'skip' || node.reason !== NOT_MATCHED)
    const others = ran.filter((node) => node.name !== test.name)
    const namesakes = tests.filter((node) => node.name === test.name).length
    const notes: string[] = []
    if (failed.length > 0 || run.code !== 0) {
      const why = failed.map((node) => `${title(node)}: ${node.error?.split('\n')[0]}`)
      notes.push(`${retry || 'FAILS ALONE, TWICE'} (exit ${run.code}) ${why.join('; ')}`)
    }
    if (ran.length === 0) notes.push('MATCHED NO TEST')
    // Skipped by the file itself (a missing program, say): reported, not counted as a problem of isolation.
    const skipped = ran.filter((node) => node.outcome === 'skip').map((node) => `skipped: ${node.reason}`)
    if (others.length > 0) notes.push(`MATCHED OTHERS: ${others.map(title).join('; ')}`)
    if (ran.length - others.length > namesakes) notes.push(`MATCHED ${ran.length} TESTS`)
    const also = namesakes > 1 ? ` (with its ${namesakes - 1} namesake(s))` : ''
    if (notes.length > 0) problems += 1
    const status = notes.length === 0 ? (skipped.length === 0 ? 'ok' : skipped.join(' | ')) : notes.join(' | ')
    console.log(`  ${status}  ${seconds(run.ms)}  ${title(test)}${also}`)
    if (notes.length > 0) console.log(`    log: ${run.log}`)
  }
  return problems
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = process.argv.slice(2)
  if (files.length === 0) {
    console.error('usage: node --import tsx scripts/each-test-alone.ts <test files...>')
    process.exit(2)
  }
  const started = Date.now()
  let problems = 0
  for (const file of files) problems += await checkFile(file)
  console.log(
    `${files.length} files, ${runs} runs in ${seconds(Date.now() - started)}: ${problems} problem(s); logs in ${logDir}`,
  )
  process.exitCode = problems === 0 ? 0 : 1
}
