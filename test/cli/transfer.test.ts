import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { backends, POSTGRES_URL, postgresBackend } from '../helpers/backends.js'
import {
  cleanup,
  eventually,
  http,
  plantstoreCommand,
  REPO_ROOT,
  runCli,
  startServer,
  tempDatabase,
  tempDir,
  WAIT_MS,
  type CliResult,
  type ServerProcess,
} from '../helpers/server-process.js'

const plantstore = plantstoreCommand

/** Runs the commands as one shell pipeline would (`a | b`), each a real process; resolves with the last's result. */
function pipeline(commands: string[][]): Promise<CliResult & { stderrs: string[]; codes: Array<number | null> }> {
  return new Promise((resolve, reject) => {
    const children = commands.map(([command, ...args]) =>
      spawn(command!, args, { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] }),
    )
    const stderrs = children.map(() => '')
    children.forEach((child, i) => {
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderrs[i] += chunk))
      const next = children[i + 1]
      // A reader that stops early (an import refusing a line) closes its stdin: the relay's EPIPE is expected.
      // What the writer still writes is then drained, so that it too can end.
      next?.stdin.on('error', () => child.stdout.resume())
      if (next !== undefined) child.stdout.pipe(next.stdin)
      if (i === 0) child.stdin.end()
    })
    const last = children.at(-1)!
    let stdout = ''
    last.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    const timer = setTimeout(() => {
      for (const child of children) child.kill('SIGKILL')
      reject(new Error(`pipeline did not end within ${WAIT_MS} ms: ${stderrs.join('\n')}`))
    }, WAIT_MS)
    // Every process ended, each with its code.
    void Promise.all(children.map((child) => once(child, 'close'))).then((ends) => {
      clearTimeout(timer)
      const codes = ends.map(([code]) => code as number | null)
      resolve({ code: codes.at(-1)!, stdout, stderr: stderrs.at(-1)!, stderrs, codes })
    })
  })
}

/**
 * `plantstore import --database url` reading `input`, loopback subscriptions allowed (the exported store's names
 * 127.0.0.1), so that each refusal is the one its input is made for.
 */
function importText(database: string, input: string): Promise<CliResult> {
  const file = join(tempDir(), 'input.ndjson')
  writeFileSync(file, input)
  const allowed = ['env', 'PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true']
  return pipeline([
    ['cat', file],
    [...allowed, ...plantstore(['import', '--database', database])],
  ])
}

const EDGE_IDS = ['-9223372036854775808', '9223372036854775807', '0', '9007199254740993', '-42']
const NAMES = ['Ficus 🌿 lyrata', 'صبار الصحراء', 'עציץ', 'Monstera "deliciosa"', 'Back\\slash\ttab']
const LIMITS = [1, 2, 3, 1000]
const FIELDS = ['', '&fields=name', '&fields=id,name', '&fields=name,tag,id']

/** Every page of the account `token` reads, for each limit and fields, following Link: status, Link and body. */
async function allPages(baseUrl: string, token: string): Promise<string[]> {
  const pages: string[] = []
  for (const limit of LIMITS) {
    for (const fields of FIELDS) {
      let path: string | undefined = `/plants?limit=${limit}${fields}`
      while (path !== undefined) {
        const res = await http(baseUrl, 'GET', path, { token })
        const link = res.headers.get('link')
        pages.push(`${path} ${res.status} ${link}\n${res.text}`)
        path = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
      }
    }
  }
  return pages
}

const secretOf = (result: CliResult) => result.stdout.split('\n')[0]!

/**
 * `tokens list` and `webhooks list`, the latter without its QUEUED and SINCE columns: queued deliveries and the
 * failures behind them do not move (docs/operations.md).
 */
async function listings(database: string): Promise<string> {
  const tokens = await runCli(['tokens', 'list', '--database', database])
  const webhooks = await runCli(['webhooks', 'list', '--database', database])
  const subscriptions = webhooks.stdout
    .trimEnd()
    .split('\n')
    .map((line) =>
      line
        .split(/\s+/)
        .filter((_, i) => i !== 4 && i !== 5)
        .join(' '),
    )
  return [tokens.stdout, ...subscriptions].join('\n')
}

describe('plantstore export and import', () => {
  const source = tempDatabase()
  const secrets: Record<'grower' | 'neighbour' | 'expired' | 'revoked' | 'maker' | 'child', string> = {
    grower: '',
    neighbour: '',
    expired: '',
    revoked: '',
    maker: '',
    child: '',
  }
  let server: ServerProcess
  let sourcePages: Record<string, string[]>
  let exported: CliResult
  const disposals: Array<() => Promise<void>> = []

  before(async () => {
    // The secret `tokens create` prints on stdout, and the id its note on stderr gives that same token.
    const create = async (account: string, ...extra: string[]) => {
      const made = await runCli(['tokens', 'create', '--account', account, '--database', source, ...extra])
      const id = /^Created (tok_[0-9a-f]{16}) /m.exec(made.stderr)?.[1]
      assert.ok(id !== undefined, made.stderr)
      return { secret: secretOf(made), id }
    }
    secrets.grower = (await create('grower', '--label', 'dashboard 🌱')).secret
    secrets.neighbour = (await create('neighbour', '--expires-in', '30d')).secret
    secrets.expired = (await create('grower', '--expires-in', '1s')).secret
    const revoked = await create('grower')
    secrets.revoked = revoked.secret
    const maker = await create('grower', '--scope', 'plants:read', '--scope', 'tokens:manage')
    secrets.maker = maker.secret
    const added = await runCli(
      ['webhooks', 'add', '--account', 'grower', '--url', 'http://127.0.0.1:9/plants', '--database', source],
      { PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true' },
    )
    assert.equal(added.code, 0, added.stderr)
    server = await startServer({ database: source })
    for (const [i, id] of EDGE_IDS.entries()) {
      const tag = i % 2 === 0 ? `,"tag":"tag ☘ ${i}"` : ''
      const body = `{"id":${id},"name":${JSON.stringify(NAMES[i])}${tag}}`
      assert.equal((await http(server.baseUrl, 'POST', '/plants', { token: secrets.grower, body })).status, 200)
    }
    await http(server.baseUrl, 'POST', '/plants', { token: secrets.neighbour, body: '{"id":7,"name":"Fern"}' })
    const made = await http(server.baseUrl, 'POST', '/tokens', {
      token: secrets.maker,
      body: { scopes: ['plants:read'] },
    })
    assert.equal(made.status, 201, made.text)
    secrets.child = (JSON.parse(made.text) as { secret: string }).secret
    // Revoked by the ids their creation named, whatever order a listing shows them in.
    for (const id of [revoked.id, maker.id])
      assert.equal((await runCli(['tokens', 'revoke', id, '--database', source])).code, 0)
    const status = async (secret: string) => (await http(server.baseUrl, 'GET', '/plants', { token: secret })).status
    // Running servers refuse a revoked token within 2 s. Each refusal spends the address's budget of failed
    // authentications (20 a minute), so the wait asks for the revoked token first and stops at the first answer
    // still 200; then what the imports must keep, each token named in a failure.
    const refused = ['revoked', 'child', 'expired'] as const
    await eventually(async () => {
      for (const name of refused) if ((await status(secrets[name])) !== 401) return false
      return true
    }, WAIT_MS).catch(() => undefined)
    const names = ['grower', 'neighbour', ...refused] as const
    const statuses = Object.fromEntries(
      await Promise.all(names.map(async (name) => [name, await status(secrets[name])])),
    )
    assert.deepEqual(statuses, { grower: 200, neighbour: 200, revoked: 401, child: 401, expired: 401 })
    sourcePages = {
      grower: await allPages(server.baseUrl, secrets.grower),
      neighbour: await allPages(server.baseUrl, secrets.neighbour),
    }
    exported = await runCli(['export', '--database', source])
  })
  after(async () => {
    await server?.stop()
    for (const dispose of disposals.reverse()) await dispose()
    await cleanup()
  })

  test('is listed in plantstore --help', async () => {
    const help = await runCli(['--help'])
    assert.match(help.stdout, /^ {2}export /m)
    assert.match(help.stdout, /^ {2}import /m)
  })

  test('export warns on stderr that it holds signing secrets, and ends with what it exported', () => {
    assert.equal(exported.code, 0, exported.stderr)
    const lines = exported.stderr.trimEnd().split('\n')
    assert.match(lines[0]!, /signing secrets of webhook subscriptions/)
    assert.equal(lines.at(-1), 'plantstore: exported 2 accounts, 6 tokens, 6 plants, 1 subscription')
    const header = JSON.parse(exported.stdout.split('\n')[0]!) as Record<string, unknown>
    assert.deepEqual([header.format, header.version, header.account], ['plantstore-export', 1, null])
  })

  const targets = POSTGRES_URL === undefined ? [] : [postgresBackend(POSTGRES_URL)]
  for (const backend of [...targets, ...backends.filter((b) => b.name === 'sqlite')]) {
    test(`export | import into ${backend.name}: tokens answer as before, every page byte for byte`, async () => {
      const database = await backend.createDatabase()
      disposals.push(database.dispose)
      const moved = await pipeline([
        plantstore(['export', '--database', source]),
        // The store's subscription names a loopback address, which the API takes only with this setting.
        ['env', 'PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true', ...plantstore(['import', '--database', database.url])],
      ])
      assert.equal(moved.code, 0, moved.stderrs.join('\n'))
      assert.match(moved.stderr, /^plantstore: imported 2 accounts, 6 tokens, 6 plants, 1 subscription into /m)
      assert.equal(await listings(database.url), await listings(source))
      const target = await startServer({ database: database.url })
      try {
        for (const [name, secret] of Object.entries(secrets)) {
          const live = name === 'grower' || name === 'neighbour'
          const res = await http(target.baseUrl, 'GET', '/plants?limit=1', { token: secret })
          assert.equal(res.status, live ? 200 : 401, name)
        }
        assert.deepEqual(await allPages(target.baseUrl, secrets.grower), sourcePages.grower)
        assert.deepEqual(await allPages(target.baseUrl, secrets.neighbour), sourcePages.neighbour)
      } finally {
        await target.stop()
      }

      // And back: from what was imported into a new SQLite store, which answers the same again.
      const back = tempDatabase()
      const returned = await pipeline([
        plantstore(['export', '--database', database.url]),
        ['env', 'PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true', ...plantstore(['import', '--database', back])],
      ])
      assert.equal(returned.code, 0, returned.stderrs.join('\n'))
      const again = await startServer({ database: back })
      try {
        assert.deepEqual(await allPages(again.baseUrl, secrets.grower), sourcePages.grower)
        assert.equal((await http(again.baseUrl, 'GET', '/plants', { token: secrets.child })).status, 401)
      } finally {
        await again.stop()
      }
    })
  }

  test('export and import show their progress on a terminal, and only there', async () => {
    const target = tempDatabase()
    const header = exported.stdout.split('\n')[0]!
    const records = [
      '{"type":"account","name":"many","createdAt":"2026-01-01T00:00:00.000Z"}',
      ...Array.from(
        { length: 5000 },
        (_, i) => `{"type":"plant","account":"many","id":"${i}","name":"plant ${i}","tag":null}`,
      ),
    ]
    const file = join(tempDir(), 'many.ndjson')
    const end = '{"type":"end","counts":{"accounts":1,"tokens":0,"plants":5000,"subscriptions":0}}'
    writeFileSync(file, [header, ...records, end].join('\n') + '\n')
    const onTerminal = (command: string) =>
      pipeline([['script', '-qec', `${plantstore([]).join(' ')} ${command}`, '/dev/null']])
    const imported = await onTerminal(`import --database ${target} < ${file}`)
    assert.match(imported.stdout, /importing: line \d/)
    assert.match(imported.stdout, /imported 1 account, 0 tokens, 5,000 plants, 0 subscriptions/)
    const shown = await onTerminal(`export --database ${target} --output ${join(tempDir(), 'out.ndjson')}`)
    assert.match(shown.stdout, /exporting: 1 account, 0 tokens, [\d,]+ plants/)
    assert.match(shown.stdout, /exported 1 account, 0 tokens, 5,000 plants, 0 subscriptions/)
    const piped = await runCli(['export', '--database', target])
    assert.doesNotMatch(piped.stderr, /exporting/)
    assert.equal(piped.stderr.trimEnd().split('\n').length, 2)
  })

  test('export --account writes that account alone, with its tokens and subscriptions', async () => {
    const one = await runCli(['export', '--account', 'neighbour', '--database', source])
    assert.equal(one.code, 0, one.stderr)
    const records = one.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    assert.equal(records[0]!.account, 'neighbour')
    assert.deepEqual(
      records.slice(1, -1).map((r) => [r.type, r.type === 'account' ? r.name : r.account]),
      [
        ['account', 'neighbour'],
        ['token', 'neighbour'],
        ['plant', 'neighbour'],
      ],
    )
    assert.deepEqual(records.at(-1), {
      type: 'end',
      counts: { accounts: 1, tokens: 1, plants: 1, subscriptions: 0 },
    })
    const hooked = await runCli(['export', '--account', 'grower', '--database', source])
    assert.equal(hooked.stdout.match(/"type":"subscription"/g)?.length, 1)
    assert.equal(hooked.stdout.match(/"type":"token"/g)?.length, 5)
  })

  test('export --output creates the file with mode 0600 and never overwrites one', async () => {
    const file = join(tempDir(), 'store.ndjson')
    const written = await runCli(['export', '--output', file, '--database', source])
    assert.equal(written.code, 0, written.stderr)
    assert.equal(written.stdout, '')
    assert.equal(statSync(file).mode & 0o777, 0o600)
    const size = statSync(file).size
    const again = await runCli(['export', '--output', file, '--database', source])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /--output: .* exists; export never overwrites a file/)
    assert.equal(statSync(file).size, size)
    assert.deepEqual(readdirSync(join(file, '..')), ['store.ndjson'], 'no temporary file left beside it')
  })

  test('export into a pipe whose reader exits at once ends with one line and exit 1', async () => {
    // Far more than a pipe holds: the export is still writing when head has exited.
    const store = tempDatabase()
    const many = Array.from(
      { length: 20_000 },
      (_, i) => `{"type":"plant","account":"many","id":"${i}","name":"plant ${i}","tag":null}`,
    )
    const input = [
      exported.stdout.split('\n')[0]!,
      '{"type":"account","name":"many","createdAt":"2026-01-01T00:00:00.000Z"}',
      ...many,
      '{"type":"end","counts":{"accounts":1,"tokens":0,"plants":20000,"subscriptions":0}}',
    ]
    assert.equal((await importText(store, input.join('\n') + '\n')).code, 0)
    // A real pipe between the two, as a shell makes: head holds its end, the export the other.
    const head = spawn('head', ['-c', '10'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const [command, ...args] = plantstore(['export', '--database', store])
    const exporter = spawn(command!, args, { cwd: REPO_ROOT, stdio: ['ignore', head.stdin, 'pipe'] })
    head.stdin.destroy()
    let headOut = ''
    head.stdout.setEncoding('utf8').on('data', (chunk: string) => (headOut += chunk))
    let stderr = ''
    exporter.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    const [[exportCode], [headCode]] = await Promise.all([once(exporter, 'close'), once(head, 'close')])
    assert.deepEqual([exportCode, headCode], [1, 0])
    assert.equal(headOut.length, 10)
    const exporting = stderr.trimEnd().split('\n')
    assert.deepEqual(exporting.slice(1), ['plantstore: the reader of the export went away (EPIPE)'])
  })

  test('a failed export --output leaves no file', async () => {
    const dir = tempDir()
    const failed = await runCli([
      'export',
      '--account',
      'nobody',
      '--output',
      join(dir, 'x.ndjson'),
      '--database',
      source,
    ])
    assert.equal(failed.code, 1)
    assert.match(failed.stderr, /--account: no account nobody/)
    assert.deepEqual(readdirSync(dir), [])
  })

  test('an export --output stopped by SIGTERM leaves no file', async () => {
    // A "PostgreSQL server" that accepts and never answers: the export waits, its temporary file begun.
    const held: Socket[] = []
    const silent = createServer((socket) => void held.push(socket)).listen(0, '127.0.0.1')
    await once(silent, 'listening')
    const { port } = silent.address() as { port: number }
    const dir = tempDir()
    const [command, ...args] = plantstore([
      'export',
      '--output',
      join(dir, 'x.ndjson'),
      '--database',
      `postgres://u@127.0.0.1:${port}/db`,
    ])
    const child = spawn(command!, args, { cwd: REPO_ROOT, stdio: 'ignore' })
    try {
      await eventually(async () => held.length > 0 && readdirSync(dir).length > 0, WAIT_MS)
      const [code, signal] = (await Promise.all([once(child, 'exit'), child.kill('SIGTERM')]))[0] as [number, string]
      assert.deepEqual([code, signal], [null, 'SIGTERM'])
      assert.deepEqual(readdirSync(dir), [])
    } finally {
      child.kill('SIGKILL')
      for (const socket of held) socket.destroy()
      silent.close()
    }
  })

  test('import refuses a store that already holds data, with exit 1, one line, and writes nothing', async () => {
    const target = tempDatabase()
    await runCli(['tokens', 'create', '--account', 'present', '--database', target])
    const before = await listings(target)
    const refused = await importText(target, exported.stdout)
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /^plantstore: .*already holds accounts, tokens or plants.*nothing was imported\n$/)
    assert.equal(await listings(target), before)
  })

  const lines = () => exported.stdout.trimEnd().split('\n')
  /** The number of the first line of the export holding `text`. */
  const lineOf = (text: string) => lines().findIndex((line) => line.includes(text)) + 1
  /** The export with its first token moved to the end, after the subscription (before the end line). */
  const outOfOrder = () => {
    const token = lineOf('"type":"token"') - 1
    const records = lines().filter((_, i) => i !== token)
    return [...records.slice(0, -1), lines()[token]!, records.at(-1)!]
  }
  const bad: Array<[string, () => string, () => RegExp]> = [
    [
      'bad JSON',
      () => [...lines().slice(0, 3), '{"type":"plant",', ...lines().slice(3)].join('\n'),
      () => /^line 4: not JSON/,
    ],
    [
      'a missing header',
      () => lines().slice(1).join('\n'),
      () => /^line 1: expected the header of a plantstore-export/,
    ],
    [
      'an unknown version',
      () => [lines()[0]!.replace('"version":1', '"version":2'), ...lines().slice(1)].join('\n'),
      () => /^line 1: plantstore-export version 2; this release reads version 1/,
    ],
    [
      'a wrong type',
      () =>
        lines()
          .map((line) => line.replace('"tag":null', '"tag":7'))
          .join('\n'),
      () => new RegExp(`^line ${lineOf('"tag":null')}: plant record: tag: expected`),
    ],
    [
      'an id out of range',
      () =>
        lines()
          .map((line) => line.replace('"id":"9223372036854775807"', '"id":"9223372036854775808"'))
          .join('\n'),
      () =>
        new RegExp(`^line ${lineOf('"id":"9223372036854775807"')}: plant record: id: 9223372036854775808 is outside`),
    ],
    [
      'an id as a number',
      () =>
        lines()
          .map((line) => line.replace('"id":"-42"', '"id":-42'))
          .join('\n'),
      () => new RegExp(`^line ${lineOf('"id":"-42"')}: plant record: id: expected string`),
    ],
    [
      'a time before 1970',
      () =>
        lines()
          .map((line) => line.replace('"createdAt":"2026', '"createdAt":"1969'))
          .join('\n'),
      () => /^line 2: account record: createdAt: expected string to match/,
    ],
    [
      'a record out of order',
      () => outOfOrder().join('\n'),
      () => new RegExp(`^line ${outOfOrder().length - 1}: token record after subscription records`),
    ],
    [
      'an export without its end line',
      () => lines().slice(0, -1).join('\n'),
      () =>
        new RegExp(`^line ${lines().length - 1}: the input ends before the export's end line \\(truncated\\?\\)\\n$`),
    ],
    [
      'an export cut off within its records',
      () => lines().slice(0, -3).join('\n') + '\n',
      () =>
        new RegExp(`^line ${lines().length - 3}: the input ends before the export's end line \\(truncated\\?\\)\\n$`),
    ],
    [
      'an end line whose counts differ from the records read',
      () =>
        lines()
          .filter((line) => !line.includes('"name":"Fern"'))
          .join('\n'),
      () =>
        new RegExp(
          `^line ${lines().length - 1}: end line: the export counts 6 plants; the input holds 5 \\(records lost\\?\\)`,
        ),
    ],
    [
      'a line longer than 1 MiB in UTF-8, though shorter in characters',
      () => [lines()[0]!, `"${'é'.repeat(600_000)}`].join('\n'),
      () => /^line 2: longer than 1048576 bytes/,
    ],
    [
      'a subscription whose URL carries credentials, as the API does, without showing them',
      () =>
        lines()
          .map((line) => line.replace('"url":"http://', '"url":"http://ops:hunter2@'))
          .join('\n'),
      () =>
        new RegExp(
          `^line ${lineOf('"type":"subscription"')}: subscription whk_[0-9a-f]{16}: url: must not carry credentials\\n$`,
        ),
    ],
    [
      'a line after the end line',
      () => [...lines(), lines()[1]!].join('\n'),
      () => new RegExp(`^line ${lines().length + 1}: a line after the export's end line`),
    ],
  ]
  // Each into a store of its own: a few at once, as their processes mostly wait on each other.
  describe('import refusals', { concurrency: 4 }, () => {
    for (const [what, input, message] of bad) {
      test(`import refuses ${what} with exit 1, the line number, and writes nothing`, async () => {
        const target = tempDatabase()
        const refused = await importText(target, input())
        assert.equal(refused.code, 1, refused.stderr)
        const line = refused.stderr.replace(/^plantstore: /, '')
        assert.match(line, message())
        assert.equal(refused.stderr.trimEnd().split('\n').length, 1)
        const after = await runCli(['export', '--database', target])
        assert.equal(after.stdout.trimEnd().split('\n').length, 2, 'the store holds nothing: header and end line alone')
        assert.match(after.stderr, /exported 0 accounts, 0 tokens, 0 plants, 0 subscriptions/)
      })
    }
  })
})
