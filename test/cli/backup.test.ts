import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync, watch, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import Database from 'better-sqlite3'
import { assertMountNamespace, skipWithoutMountNamespace } from '../helpers/mount-namespace.js'
import {
  cleanup,
  eventually,
  http,
  plantstoreCommand,
  REPO_ROOT,
  runCli,
  spawnPlantstore,
  startServer,
  tempDir,
  type CliResult,
} from '../helpers/server-process.js'
import { runOnTerminal } from '../helpers/terminal.js'

after(cleanup)

const TOKEN = 'backup-test-' + randomBytes(30).toString('base64url')
// Plants in the store the server writes to before its backup: a copy long enough to be stopped in the middle.
const STOCK = 50_000n
// Their ids, above any the writers send.
const STOCKED_FROM = 1_000_000_000n
// Writes answered while the backup is held in the middle of its copy.
const HELD = 8
// Each request in its own counter: the load below sends far more than the default rate limits allow.
const UNLIMITED = { PLANTSTORE_RATE_LIMIT: '0', PLANTSTORE_ACCOUNT_RATE_LIMIT: '0', PLANTSTORE_AUTH_FAILURE_LIMIT: '0' }

interface Counts {
  plants: number
  accounts: number
  tokens: number
  subscriptions: number
}

const SUMMARY =
  /^plantstore: backed up (\S+) to (\S+): (\d+) plants?, (\d+) accounts?, (\d+) tokens?, (\d+) subscriptions?, (\d+) bytes? \(\d+\.\d MB\)\n$/

/** The counts and size the command printed on stdout. */
function summaryOf(result: CliResult): Counts & { bytes: number } {
  const match = SUMMARY.exec(result.stdout)
  assert.ok(match, `the summary line on stdout: ${result.stdout}`)
  const [plants, accounts, tokens, subscriptions, bytes] = match.slice(3).map(Number) as number[]
  return { plants: plants!, accounts: accounts!, tokens: tokens!, subscriptions: subscriptions!, bytes: bytes! }
}

/** What a SQLite file holds, read with the test's own SQL: the check that does not take the command's word. */
function inspect(file: string): Counts & { integrity: string[]; journal: string; plantIds: Set<bigint> } {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  try {
    const count = (table: string) => db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number
    return {
      integrity: (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check),
      journal: db.pragma('journal_mode', { simple: true }) as string,
      plantIds: new Set(db.prepare('SELECT id FROM plants').pluck().safeIntegers().all() as bigint[]),
      plants: count('plants'),
      accounts: count('accounts'),
      tokens: count('tokens'),
      subscriptions: count('webhook_subscriptions'),
    }
  } finally {
    db.close()
  }
}

/** Exit status 1, nothing on stdout, and exactly one line on stderr, matching `line`. */
function assertRefused(result: CliResult, line: RegExp): void {
  assert.equal(result.code, 1, `exit code; stderr: ${result.stderr}`)
  assert.equal(result.stdout, '')
  const lines = result.stderr.trimEnd().split('\n')
  assert.equal(lines.length, 1, `one line on stderr, got:\n${result.stderr}`)
  assert.match(lines[0]!, line)
}

/** The entries of `dir` other than the store's own files: none means no backup and no temporary file. */
function strangers(dir: string): string[] {
  return readdirSync(dir).filter((name) => !/^store\.db(-wal|-shm)?$/.test(name))
}

/**
 * A store in a new folder, as a server would leave it: migrated, the tokens and subscription the CLI makes, then
 * `plants` plants of account `acme` inserted with SQL in one transaction (through the API a big store would take
 * minutes). Ids 1..plants; the store is closed afterwards.
 */
async function seededStore(plants: number): Promise<{ dir: string; store: string; url: string }> {
  const dir = tempDir()
  const store = join(dir, 'store.db')
  const url = `sqlite:${store}`
  for (const account of ['acme', 'acme', 'globex']) {
    const made = await runCli(['tokens', 'create', '--account', account, '--database', url])
    assert.equal(made.code, 0, made.stderr)
  }
  const hook = await runCli(
    ['webhooks', 'add', '--account', 'acme', '--url', 'http://127.0.0.1:9/hook', '--database', url],
    { PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true' },
  )
  assert.equal(hook.code, 0, hook.stderr)
  const db = new Database(store)
  try {
    const account = db.prepare("SELECT id FROM accounts WHERE name = 'acme'").pluck().get() as number
    const insert = db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (?, ?, ?, ?)')
    db.transaction(() => {
      for (let id = 1; id <= plants; id++)
        insert.run(account, id, `Monstera deliciosa no. ${id}`, id % 3 ? 'aroid' : null)
    })()
  } finally {
    db.close()
  }
  return { dir, store, url }
}

/** Process `pid`'s state letter from /proc (`T`: stopped by a signal). */
const processState = (pid: number) => /^\d+ \(.*\) (\S)/.exec(procFile(`/proc/${pid}/stat`))?.[1]

describe('plantstore backup of a SQLite store a server is writing to', () => {
  test('holds every plant acknowledged before it began and none sent once it copied, while the server acknowledged writes in the middle of the copy; passes the integrity check, and serves with the original tokens', async () => {
    const dir = tempDir()
    const store = join(dir, 'store.db')
    const url = `sqlite:${store}`
    const server = await startServer({ database: url, env: { PLANTSTORE_BOOTSTRAP_TOKEN: TOKEN, ...UNLIMITED } })
    await eventually(
      async () => (await http(server.baseUrl, 'GET', '/plants', { token: TOKEN })).status === 200,
      10_000,
    )
    const made = await runCli(['tokens', 'create', '--account', 'default', '--scope', 'plants:read', '--database', url])
    assert.equal(made.code, 0, made.stderr)
    const reader = made.stdout.split('\n')[0]!
    // Plants enough that the copy is still writing when the test stops it (below), inserted with SQL (through the
    // API they would take a minute); their ids are above any the writers use.
    const db = new Database(store)
    try {
      const insert = db.prepare(
        "INSERT INTO plants (account_id, id, name, tag) SELECT id, ?, ?, NULL FROM accounts WHERE name = 'default'",
      )
      db.transaction(() => {
        for (let id = 1n; id <= STOCK; id++) insert.run(STOCKED_FROM + id, `Monstera deliciosa no. ${id}`)
      })()
    } finally {
      db.close()
    }

    // Four writers POSTing fresh ids and a reader, all the while: every answer is counted by status; the plants
    // acknowledged, in the order their answers came.
    const acknowledged: bigint[] = []
    const statuses = new Map<string, number>()
    const tally = (what: string) => statuses.set(what, (statuses.get(what) ?? 0) + 1)
    let running = true
    let next = 1
    const write = async () => {
      while (running) {
        const id = next++
        const res = await http(server.baseUrl, 'POST', '/plants', { token: TOKEN, body: { id, name: `Fern ${id}` } })
        tally(`POST ${res.status}`)
        if (res.status === 200) acknowledged.push(BigInt(id))
      }
    }
    const read = async () => {
      while (running) tally(`GET ${(await http(server.baseUrl, 'GET', '/plants?limit=5', { token: reader })).status}`)
    }
    const load = Promise.all([write(), write(), write(), write(), read()])
    try {
      await eventually(async () => acknowledged.length >= 100, 15_000, 20)
      const before = [...acknowledged]
      const copy = join(dir, 'backup.db')
      // The barrier: the backup is stopped (SIGSTOP) as its copy's rollback journal appears, which VACUUM INTO creates
      // once its snapshot is taken, as it begins to write; it is held until writers sending from then on have had
      // answers. Where the log of acknowledgements stood then, and the next id a writer was to send.
      let stop!: (at: { journal: string; acknowledged: number; next: number }) => void
      const stopped = new Promise<Parameters<typeof stop>[0]>((resolve) => (stop = resolve))
      const watcher = watch(dir, (_, name) => {
        if (!name?.endsWith('.tmp-journal')) return
        backup.kill('SIGSTOP')
        watcher.close()
        stop({ journal: join(dir, name), acknowledged: acknowledged.length, next })
      })
      const backup = spawnPlantstore(['backup', copy, '--database', url])
      let stdout = ''
      let stderr = ''
      backup.stdout!.on('data', (chunk: string) => (stdout += chunk))
      backup.stderr!.on('data', (chunk: string) => (stderr += chunk))
      const exited = new Promise<number | null>((resolve) => backup.once('close', (code) => resolve(code)))
      let held: { size: number; next: number } | undefined
      let code: number | null
      try {
        const at = await Promise.race([stopped, exited.then(() => undefined)])
        if (at !== undefined) {
          await eventually(async () => processState(backup.pid!) === 'T', 5_000, 1)
          // What the copy held while stopped; more after shows the copy was going on meanwhile.
          const size = statSync(at.journal.slice(0, -'-journal'.length)).size
          const sentSince = () => acknowledged.slice(at.acknowledged).filter((id) => id >= at.next).length
          await eventually(async () => sentSince() >= HELD, 15_000, 5).catch(() =>
            assert.fail(`writes sent while the copy was held, answered: ${sentSince()} of ${HELD}`),
          )
          held = { size, next: at.next }
        }
      } finally {
        watcher.close()
        backup.kill('SIGCONT')
        code = await exited
      }
      running = false
      await load

      assert.equal(code, 0, stderr)
      assert.equal(stderr, '', 'no progress when stderr is not a terminal')
      assert.deepEqual([...statuses.keys()].sort(), ['GET 200', 'POST 200'], 'every request answered 200')
      assert.ok(held !== undefined, 'the backup was stopped as it began to write its copy')
      assert.ok(
        statSync(copy).size > held.size,
        `the copy was still being written when stopped: ${held.size} bytes then, ${statSync(copy).size} at the end`,
      )
      const found = inspect(copy)
      assert.deepEqual(found.integrity, ['ok'])
      assert.deepEqual(
        before.filter((id) => !found.plantIds.has(id)),
        [],
        'acknowledged before the backup, missing from it',
      )
      // Sent once the copy had begun (HELD of them answered while it was held): after its snapshot, so none is in it.
      const sentDuring = (id: bigint) => id >= BigInt(held!.next) && id < STOCKED_FROM
      assert.deepEqual([...found.plantIds].filter(sentDuring), [], 'sent once the copy had begun, yet in it')
      const { plants, accounts, tokens, subscriptions } = found
      assert.deepEqual(summaryOf({ code, stdout, stderr }), {
        plants,
        accounts,
        tokens,
        subscriptions,
        bytes: statSync(copy).size,
      })
      assert.deepEqual({ accounts, tokens }, { accounts: 1, tokens: 2 })

      await server.stop()
      const restored = await startServer({ database: `sqlite:${copy}` })
      for (const token of [TOKEN, reader]) {
        const page = await http(restored.baseUrl, 'GET', '/plants?limit=1000&fields=id,name', { token })
        assert.equal(page.status, 200, page.text)
        const ids = (JSON.parse(page.text) as Array<{ id: number }>).map((plant) => BigInt(plant.id))
        const expected = [...found.plantIds].sort((a, b) => (a < b ? -1 : 1)).slice(0, 1000)
        assert.deepEqual(ids, expected)
      }
      const write = await http(restored.baseUrl, 'POST', '/plants', { token: TOKEN, body: { id: 9e9, name: 'new' } })
      assert.equal(write.status, 200, write.text)
      await restored.stop()
    } finally {
      running = false
      await load
    }
  })
})

describe('plantstore backup of a quiet store', () => {
  let source: Awaited<ReturnType<typeof seededStore>>
  before(async () => {
    source = await seededStore(2500)
  })

  test('prints what it copied on one line of stdout, counted right; the copy is one file, owner-only, in rollback-journal mode', async () => {
    const target = join(tempDir(), 'nightly.db')
    const result = await runCli(['backup', target, '--database', source.url])
    assert.equal(result.code, 0, result.stderr)
    assert.equal(result.stderr, '')
    assert.deepEqual(summaryOf(result), {
      plants: 2500,
      accounts: 2,
      tokens: 3,
      subscriptions: 1,
      bytes: statSync(target).size,
    })
    assert.match(result.stdout, new RegExp(`^plantstore: backed up ${source.url} to ${target}: `))
    const found = inspect(target)
    assert.deepEqual(found.integrity, ['ok'])
    assert.equal(found.journal, 'delete')
    assert.equal(statSync(target).mode & 0o777, 0o600)
    assert.deepEqual(readdirSync(join(target, '..')), ['nightly.db'], 'no -wal, -shm or temporary file beside it')
  })

  test('counts one of each in the singular', async () => {
    const dir = tempDir()
    const url = `sqlite:${join(dir, 'one.db')}`
    assert.equal((await runCli(['tokens', 'create', '--account', 'solo', '--database', url])).code, 0)
    const hook = ['webhooks', 'add', '--account', 'solo', '--url', 'http://127.0.0.1:9/hook', '--database', url]
    assert.equal((await runCli(hook, { PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true' })).code, 0)
    const db = new Database(join(dir, 'one.db'))
    db.prepare("INSERT INTO plants (account_id, id, name) SELECT id, 1, 'Fern' FROM accounts").run()
    db.close()
    const target = join(dir, 'one-backup.db')
    const result = await runCli(['backup', target, '--database', url])
    assert.equal(
      result.stdout,
      `plantstore: backed up ${url} to ${target}: 1 plant, 1 account, 1 token, 1 subscription, ` +
        `${statSync(target).size} bytes (${(statSync(target).size / 1e6).toFixed(1)} MB)\n`,
    )
  })

  test('refuses a file that exists with exit 1 and one line, leaving it untouched; --force replaces it', async () => {
    const dir = tempDir()
    const target = join(dir, 'backup.db')
    writeFileSync(target, 'last week')
    const refused = await runCli(['backup', target, '--database', source.url])
    assertRefused(refused, /^plantstore: PATH: .*backup\.db exists; add --force to replace it$/)
    assert.equal(readFileSync(target, 'utf8'), 'last week')
    assert.deepEqual(readdirSync(dir), ['backup.db'])

    const forced = await runCli(['backup', target, '--force', '--database', source.url])
    assert.equal(forced.code, 0, forced.stderr)
    assert.equal(inspect(target).plants, 2500)
    assert.deepEqual(readdirSync(dir), ['backup.db'])
  })

  test('refuses the store itself as the target, even with --force, and leaves the store as it was', async () => {
    const before = inspect(source.store)
    const result = await runCli(['backup', source.store, '--force', '--database', source.url])
    assertRefused(result, /^plantstore: backup: .*store\.db is the store itself; nothing was written$/)
    assert.deepEqual(inspect(source.store), before)
    assert.deepEqual(strangers(source.dir), [])
  })

  test('fails with one line and writes nothing into a folder that does not exist', async () => {
    const missing = join(tempDir(), 'no-such-folder')
    const result = await runCli(['backup', join(missing, 'backup.db'), '--database', source.url])
    assertRefused(result, /^plantstore: backup: no folder .*no-such-folder; nothing was written$/)
    assert.equal(existsSync(missing), false)
  })

  test('fails with one line naming the store when there is none, and creates none', async () => {
    const dir = tempDir()
    const result = await runCli(['backup', join(dir, 'backup.db'), '--database', `sqlite:${join(dir, 'store.db')}`])
    assertRefused(result, /^plantstore: backup: no SQLite store at .*store\.db; nothing was written$/)
    assert.deepEqual(readdirSync(dir), [])
  })

  test('refuses a PostgreSQL URL with one line naming pg_dump and the docs, without connecting', async () => {
    const dir = tempDir()
    // Nothing listens on port 1: a connection attempt would fail otherwise, and the password must not show.
    const result = await runCli(['backup', join(dir, 'backup.db'), '--database', 'postgres://u:secretpw@127.0.0.1:1/x'])
    assertRefused(
      result,
      /^plantstore: DATABASE_URL: PostgreSQL stores are backed up with PostgreSQL's own tools: pg_dump, or base backups with WAL archiving \(see docs\/operations\.md#backups\)$/,
    )
    assert.deepEqual(readdirSync(dir), [])
  })

  test('refuses a folder as the target with one line, and writes nothing into it', async () => {
    const dir = tempDir()
    const result = await runCli(['backup', dir, '--force', '--database', source.url])
    assertRefused(result, /^plantstore: backup: .* is a folder; give a file name; nothing was written$/)
    assert.deepEqual(readdirSync(dir), [])
  })

  test('fails with one line when the store is not a SQLite file, or holds no plantstore schema, and writes nothing', async () => {
    const dir = tempDir()
    const notSqlite = join(dir, 'notes.txt')
    writeFileSync(notSqlite, 'not a database, but long enough to have a header of 100 bytes. '.repeat(4))
    const empty = join(dir, 'empty.db')
    new Database(empty).close()
    const cases: Array<[string, RegExp]> = [
      [notSqlite, /^plantstore: backup: file is not a database; nothing was written$/],
      [empty, /^plantstore: backup: it is not a plantstore store \(no schema_migrations\); nothing was written$/],
      [':memory:', /^plantstore: backup: an in-memory store holds nothing to back up; nothing was written$/],
    ]
    for (const [store, line] of cases) {
      const result = await runCli(['backup', join(dir, 'backup.db'), '--database', `sqlite:${store}`])
      assertRefused(result, line)
      assert.deepEqual(readdirSync(dir).sort(), ['empty.db', 'notes.txt'])
    }
  })

  test('exits 1 with one line naming PATH when given no path or two', async () => {
    for (const paths of [[], ['a.db', 'b.db']]) {
      const result = await runCli(['backup', ...paths, '--database', source.url])
      assertRefused(result, /^plantstore: PATH: give exactly one file to write the backup to$/)
    }
  })
})

describe('plantstore backup that fails on the way', () => {
  test('keeps no file when the copy fails its integrity check', async () => {
    const { dir, url, store } = await seededStore(0)
    // Plant 7 of the first account, named 16 Z's, untagged; then its record's header edited so that the name reads
    // as NULL and the 16 bytes as its tag: VACUUM INTO copies the row as it is, and the check finds it.
    const db = new Database(store)
    db.prepare('INSERT INTO plants (account_id, id, name, tag) VALUES (1, 7, ?, NULL)').run('Z'.repeat(16))
    db.close()
    const bytes = readFileSync(store)
    const header = Buffer.from([0x05, 0x09, 0x01, 0x2d, 0x00, 0x07])
    const at = bytes.indexOf(Buffer.concat([header, Buffer.from('Z'.repeat(16))]))
    assert.notEqual(at, -1, 'the record of plant 7')
    bytes[at + 3] = 0x00
    bytes[at + 4] = 0x2d
    writeFileSync(store, bytes)

    const result = await runCli(['backup', join(dir, 'backup.db'), '--database', url])
    assertRefused(
      result,
      /^plantstore: backup: the copy failed its integrity check: NULL value in plants\.name; .*; nothing was written$/,
    )
    assert.deepEqual(strangers(dir), [])
  })

  // The target folder is a 1 MiB tmpfs mounted in a mount namespace of the command's own, as in disk-full.test.ts;
  // the shell lists the folder from inside, before the namespace (and its tmpfs) goes.
  const MOUNT = 'mount -t tmpfs -o size=1m plantstore-test "$0"'
  test('keeps no file and no temporary file when the disk fills up', { skip: skipWithoutMountNamespace }, async () => {
    assertMountNamespace()
    const { url, store } = await seededStore(30_000)
    assert.ok(statSync(store).size > 2 ** 20, 'a store larger than the disk')
    const target = tempDir()
    // The store's URL, then the command: "$@" after the shift is all of it, node flags included.
    const script = `${MOUNT} && store=$1 && shift && "$@" "$0/backup.db" --database "$store"; echo "exit $?"; ls -A "$0"`
    const command = plantstoreCommand(['backup'])
    const run = spawnSync('unshare', ['-Urm', 'sh', '-c', script, target, url, ...command], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 30_000,
    })
    assert.equal(run.stdout, 'exit 1\n', `stderr: ${run.stderr}`)
    assert.match(run.stderr, /^plantstore: backup: database or disk is full; nothing was written\n$/)
  })
})

/** A file of /proc, or '' once its process has gone. */
function procFile(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

/** The processes below `pid`, children first, from /proc (Linux). */
function descendants(pid: number): number[] {
  let tasks: string[]
  try {
    tasks = readdirSync(`/proc/${pid}/task`)
  } catch {
    return []
  }
  const children = tasks.flatMap((task) =>
    procFile(`/proc/${pid}/task/${task}/children`).split(' ').filter(Boolean).map(Number),
  )
  return children.flatMap((child) => [child, ...descendants(child)])
}

/**
 * Runs `plantstore ...args` on a terminal (where it shows its progress) and kills it with SIGKILL once it says it
 * is copying: found as the process with `target` among its arguments. Resolves once it has gone.
 */
function killedWhileCopying(args: string[], target: string): Promise<void> {
  const shell = plantstoreCommand(args)
    .map((word) => `'${word.replaceAll("'", "'\\''")}'`)
    .join(' ')
  const script = spawn('script', ['-qec', shell, '/dev/null'], { cwd: REPO_ROOT })
  let output = ''
  let killed = false
  return new Promise((resolve, reject) => {
    script.once('error', reject)
    script.stdout.setEncoding('utf8')
    script.stdout.on('data', (chunk: string) => {
      output += chunk
      if (killed || !/plantstore: copying .* \(\d+%\)/.test(output)) return
      const backup = descendants(script.pid!).find((pid) =>
        procFile(`/proc/${pid}/cmdline`).split('\0').includes(target),
      )
      if (backup === undefined) return reject(new Error(`no process backing up to ${target}`))
      process.kill(backup, 'SIGKILL')
      killed = true
    })
    script.once('close', () => (killed ? resolve() : reject(new Error(`ended before it was killed:\n${output}`))))
  })
}

/**
 * How long a whole backup of the large store may take before the test calls it hung: a few seconds alone, but it
 * passed the helpers' 15 s while the machine compiled beside three test files (load over 5 on 2 cores).
 */
const LARGE_BACKUP_MS = 120_000

describe('plantstore backup of a large store', () => {
  let source: Awaited<ReturnType<typeof seededStore>>
  before(async () => {
    source = await seededStore(300_000)
  })

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`interrupted by ${signal} while it copies, ends by that signal and leaves no file and no temporary file`, async () => {
      const target = join(source.dir, `${signal}.db`)
      const child = spawnPlantstore(['backup', target, '--database', source.url])
      let stderr = ''
      child.stderr!.on('data', (chunk: string) => (stderr += chunk))
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_, sig) => resolve(sig)))
      await eventually(async () => strangers(source.dir).some((name) => name.endsWith('.tmp')), 15_000, 2)
      child.kill(signal)
      assert.equal(await exited, signal)
      assert.equal(stderr, `plantstore: backup interrupted by ${signal}; nothing was written\n`)
      assert.deepEqual(strangers(source.dir), [])
    })
  }

  test('killed (SIGKILL) while it copies, leaves files the next backup to the same file removes, saying so', async () => {
    const dir = tempDir()
    const target = join(dir, 'nightly.db')
    await killedWhileCopying(['backup', target, '--database', source.url], target)
    const left = readdirSync(dir).sort()
    assert.ok(left.length > 0, 'the killed backup left its temporary files')
    // A whole backup of the large store: a hang guard of its own, for a machine busy with other work.
    const next = await runCli(['backup', target, '--database', source.url], {}, LARGE_BACKUP_MS)
    assert.equal(next.code, 0, next.stderr)
    assert.deepEqual(readdirSync(dir), ['nightly.db'], 'nothing but the new backup')
    const files = left.length === 1 ? '1 temporary file' : `${left.length} temporary files`
    assert.equal(
      next.stderr,
      `plantstore: removed ${files} an earlier backup left when killed: ${left.map((name) => join(dir, name)).join(' ')}\n`,
    )
  })

  test('shows its progress on a terminal: bytes copied of the store, then the check, then the summary', async () => {
    const target = join(tempDir(), 'backup.db')
    const { output, code } = await runOnTerminal(['backup', target, '--database', source.url])
    assert.equal(code, 0, output)
    const copied = [...output.matchAll(/plantstore: copying ([\d.]+) MB of about ([\d.]+) MB \((\d+)%\)/g)]
    assert.ok(copied.length > 0, `progress lines in:\n${JSON.stringify(output)}`)
    const shares = copied.map((match) => Number(match[3]))
    assert.deepEqual(
      shares,
      [...shares].sort((a, b) => a - b),
      'the share only grows',
    )
    const total = Number(copied[0]![2]) * 1e6
    assert.ok(Math.abs(total - statSync(source.store).size) < 1e5, 'of about the size of the store')
    const size = (statSync(target).size / 1e6).toFixed(1)
    assert.ok(output.includes(`\r\x1b[Kplantstore: checking the copy (${size} MB)\r\x1b[K`), JSON.stringify(output))
    assert.match(
      output,
      /\r\x1b\[Kplantstore: backed up \S+ to \S+: 300000 plants, 2 accounts, 3 tokens, 1 subscription, /,
    )
  })
})

describe('plantstore backup --help', () => {
  test('prints its usage, and plantstore --help lists the command', async () => {
    const help = await runCli(['backup', '--help'])
    assert.equal(help.code, 0, help.stderr)
    assert.match(help.stdout, /^Usage: plantstore backup PATH \[--database URL\] \[--force\]$/m)
    assert.match(help.stdout, /VACUUM INTO/)
    assert.match(help.stdout, /docs\/operations\.md#backups/)
    const all = await runCli(['--help'])
    assert.match(all.stdout, /^ {2}backup {4}copy a SQLite store to a file while it serves$/m)
  })
})
