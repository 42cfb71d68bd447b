import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import { mintToken } from '../../src/auth/issue-token.js'
import { EntryReader, lines } from '../../src/cli/import-lines.js'
import { EXPORT_FORMAT, EXPORT_VERSION, type RecordType } from '../../src/schemas/transfer.js'
import {
  openStorage,
  openTransfer,
  StoreNotEmptyError,
  type InstrumentedStorage,
  type StoreEntry,
} from '../../src/storage/index.js'
import { TRANSFER_PAGE } from '../../src/storage/transfer-rules.js'
import { QuotaExceededError, type NewToken, type StoredPlant } from '../../src/storage/types.js'
import { newSigningSecret, newSubscriptionId, plantCreated } from '../../src/webhooks/events.js'
import { backends, freshStorage, type TestBackend } from '../helpers/backends.js'
import { unmarkToken } from '../helpers/unmark-token.js'
import { listPlants } from '../helpers/plants.js'

const EDGE_IDS = [-9223372036854775808n, 9223372036854775807n, 0n, 2n ** 53n + 1n, -1n]
const TEXTS = ['Ficus 🌿 lyrata', 'صبار الصحراء', 'קקטוס', 'Tab\there, "quoted", back\\slash', 'line\nbreak\r']

const DAY = 86_400_000

async function collect(entries: AsyncIterable<StoreEntry>): Promise<StoreEntry[]> {
  const all: StoreEntry[] = []
  for await (const entry of entries) all.push(entry)
  return all
}

async function readAll(url: string, account?: string): Promise<StoreEntry[]> {
  const transfer = await openTransfer(url, { migrate: false })
  try {
    return await collect(transfer.read(account))
  } finally {
    await transfer.close()
  }
}

async function writeAll(url: string, entries: AsyncIterable<StoreEntry> | StoreEntry[]) {
  const transfer = await openTransfer(url, { migrate: true })
  try {
    return await transfer.write(
      Symbol.asyncIterator in entries
        ? entries
        : (async function* () {
            yield* entries
          })(),
    )
  } finally {
    await transfer.close()
  }
}

/** What a store holds, as the source of a transfer: tokens in every state, a lineage, plants, subscriptions. */
interface Source {
  url: string
  tokens: Record<'live' | 'expired' | 'revoked' | 'maker' | 'child' | 'grandchild' | 'other', NewToken>
  plants: StoredPlant[]
}

async function fill(storage: InstrumentedStorage, url: string): Promise<Source> {
  const make = async (accountName: string, extra: Parameters<typeof mintToken>[0] = { accountName }) => {
    const { record } = mintToken({ ...extra, accountName })
    await storage.tokens.create(record)
    return record
  }
  const live = await make('grower', { accountName: 'grower', label: 'dashboard 🌱', scopes: ['plants:read'] })
  const expired = await make('grower', { accountName: 'grower', expiresAt: new Date(Date.now() - DAY) })
  const revoked = await make('grower')
  await storage.tokens.revoke(revoked.id)
  const maker = await make('grower', {
    accountName: 'grower',
    scopes: ['plants:read', 'plants:write', 'tokens:manage'],
  })
  const child = await make('grower', { accountName: 'grower', createdBy: maker.id })
  const grandchild = await make('grower', { accountName: 'grower', createdBy: child.id })
  await storage.tokens.revoke(maker.id)
  // As when a child is made while its maker's revocation runs: only the lineage still ends it.
  await unmarkToken(url, grandchild.id)
  const other = await make('neighbour', { accountName: 'neighbour', expiresAt: new Date(Date.now() + 30 * DAY) })

  const grower = await storage.tokens.accountId('grower')
  const plants = EDGE_IDS.map((id, i) => ({ id, name: TEXTS[i % TEXTS.length]!, tag: i % 2 === 0 ? 'tag ☘' : null }))
  for (const plant of plants) assert.equal(await storage.plants.create(grower, plant, plantCreated), 'created')
  const neighbour = await storage.tokens.accountId('neighbour')
  await storage.plants.create(neighbour, { id: 7n, name: 'Neighbour’s fern', tag: null }, plantCreated)
  for (const [accountName, eventTypes] of [
    ['grower', ['plant.created']],
    ['neighbour', ['plant.created', 'plant.deleted']],
  ] as const) {
    await storage.webhooks.createSubscription({
      id: newSubscriptionId(),
      accountName,
      url: `https://hooks.example.com/${accountName}?q=ü`,
      secret: newSigningSecret(),
      eventTypes: [...eventTypes],
    })
  }
  return { url, tokens: { live, expired, revoked, maker, child, grandchild, other }, plants }
}

/** Whether find refuses `token` now: revoked (itself or through its lineage) or expired. */
async function refused(storage: InstrumentedStorage, token: NewToken): Promise<boolean> {
  const found = await storage.tokens.find(token.secretHash)
  assert.ok(found !== undefined, `${token.id} is found`)
  return found.revokedAt !== null || (found.expiresAt !== null && found.expiresAt.getTime() <= Date.now())
}

const pairs: Array<[TestBackend, TestBackend]> = backends.flatMap((from) =>
  backends.map((to) => [from, to] as [TestBackend, TestBackend]),
)

for (const [from, to] of pairs) {
  describe(`export and import, ${from.name} to ${to.name}`, () => {
    let source: Source
    let exported: StoreEntry[]
    let targetUrl: string
    let target: InstrumentedStorage
    const disposals: Array<() => Promise<void>> = []
    before(async () => {
      const fresh = await freshStorage(from)
      disposals.push(fresh.dispose)
      source = await fill(fresh.storage, fresh.url)
      exported = await readAll(fresh.url)
      const database = await to.createDatabase()
      disposals.push(database.dispose)
      targetUrl = database.url
      await writeAll(targetUrl, exported)
      target = await openStorage(targetUrl, { migrate: false })
      disposals.push(() => target.close())
    })
    after(async () => {
      for (const dispose of disposals.reverse()) await dispose()
    })

    test('reads back every record as it was written: accounts, tokens, plants, subscriptions', async () => {
      assert.deepEqual(await readAll(targetUrl), exported)
      const types = new Set(exported.map((entry) => entry.type))
      assert.deepEqual([...types], ['account', 'token', 'plant', 'subscription'])
    })

    test('writes accounts, then tokens with each maker before what it made, then plants, then subscriptions', () => {
      const order = exported.map((entry) => RANK[entry.type])
      assert.deepEqual(order, [...order].sort())
      const ids = exported.flatMap((entry) => (entry.type === 'token' ? [entry.id] : []))
      const { maker, child, grandchild } = source.tokens
      assert.ok(ids.indexOf(maker.id) < ids.indexOf(child.id) && ids.indexOf(child.id) < ids.indexOf(grandchild.id))
    })

    test('keeps int64 edge ids and non-ASCII text exact', async () => {
      const grower = await target.tokens.accountId('grower')
      const page = await listPlants(target.plants, grower, { limit: 100 })
      assert.deepEqual(
        page,
        [...source.plants].sort((a, b) => (a.id < b.id ? -1 : 1)),
      )
    })

    test('keeps every token working as before; revoked, expired and lineage-ended ones stay refused', async () => {
      const { live, expired, revoked, maker, child, grandchild, other } = source.tokens
      for (const token of [live, other]) assert.equal(await refused(target, token), false, token.id)
      for (const token of [expired, revoked, maker, child, grandchild]) {
        assert.equal(await refused(target, token), true, token.id)
      }
      const found = await target.tokens.find(live.secretHash)
      assert.equal(found?.label, 'dashboard 🌱')
      assert.deepEqual(found?.scopes, ['plants:read'])
      assert.equal((await target.tokens.find(grandchild.secretHash))?.createdBy, child.id)
    })

    test('lists the subscriptions with their urls, event types and state, nothing queued', async () => {
      const listed = (await target.webhooks.listSubscriptions()).map((s) => [
        s.accountName,
        s.url,
        s.eventTypes,
        s.state,
        s.queued,
      ])
      assert.deepEqual(
        listed.sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
        [
          ['grower', 'https://hooks.example.com/grower?q=ü', ['plant.created'], 'active', 0],
          ['neighbour', 'https://hooks.example.com/neighbour?q=ü', ['plant.created', 'plant.deleted'], 'active', 0],
        ],
      )
    })
  })
}

const RANK: Record<StoreEntry['type'], number> = { account: 0, token: 1, plant: 2, subscription: 3 }

const at = (ms: number) => new Date(ms)

/** Records of a store made up for import: `plants` plants spread over two accounts. */
function* madeUp(plants: number): Generator<StoreEntry> {
  const names = ['first', 'second']
  for (const name of names) yield { type: 'account', name, createdAt: at(1_700_000_000_000) }
  for (const [i, name] of names.entries()) {
    const { record } = mintToken({ accountName: name })
    yield {
      type: 'token',
      id: record.id,
      account: name,
      secretHash: record.secretHash,
      scopes: record.scopes,
      label: null,
      // Apart, so that the order an export reads them in (oldest first) is theirs.
      createdAt: at(1_700_000_000_000 + i),
      expiresAt: null,
      revokedAt: null,
      createdBy: null,
    }
  }
  for (let i = 0; i < plants; i++) {
    const account = names[i < plants / 2 ? 0 : 1]!
    yield { type: 'plant', account, id: BigInt(i) * 3n - 9000n, name: `plant ${i}`, tag: i % 3 === 0 ? null : 'x' }
  }
}

for (const backend of backends) {
  describe(`export and import (${backend.name})`, () => {
    const disposals: Array<() => Promise<void>> = []
    after(async () => {
      for (const dispose of disposals.reverse()) await dispose()
    })
    /** Storage on `url`, closed after the suite even when a test fails half way. */
    const opened = async (url: string, options?: Parameters<typeof openStorage>[1]) => {
      const storage = await openStorage(url, options)
      disposals.push(() => storage.close())
      return storage
    }
    const empty = async () => {
      const database = await backend.createDatabase()
      disposals.push(database.dispose)
      return database.url
    }

    test('refuses a store that already holds a token, and writes nothing', async () => {
      const url = await empty()
      const storage = await opened(url)
      await storage.tokens.create(mintToken({ accountName: 'present' }).record)
      await assert.rejects(writeAll(url, [...madeUp(10)]), StoreNotEmptyError)
      assert.deepEqual(
        (await readAll(url)).map((entry) => entry.type),
        ['account', 'token'],
      )
    })

    test('refuses a store that already holds an account or a plant, and writes nothing', async () => {
      const url = await empty()
      const storage = await opened(url)
      const id = await storage.tokens.accountId('bare')
      await assert.rejects(writeAll(url, [...madeUp(4)]), StoreNotEmptyError)
      await storage.plants.create(id, { id: 1n, name: 'one', tag: null }, plantCreated)
      await assert.rejects(writeAll(url, [...madeUp(4)]), StoreNotEmptyError)
      assert.equal((await readAll(url)).length, 2)
    })

    test('writes nothing when the records fail part way, plants already sent', async () => {
      const url = await empty()
      async function* failing() {
        yield* madeUp(3000)
        throw new Error('line 3005: bad')
      }
      await assert.rejects(writeAll(url, failing()), /line 3005: bad/)
      assert.deepEqual(await readAll(url), [])
      // And the store takes an import afterwards: the failed one left nothing behind.
      assert.equal((await writeAll(url, [...madeUp(10)])).plants, 10)
    })

    test('reads more plants than a page holds, across accounts, every one once and in order', async () => {
      const url = await empty()
      const plants = 2 * TRANSFER_PAGE + 17
      const written = [...madeUp(plants)]
      assert.deepEqual(await writeAll(url, written), { accounts: 2, tokens: 2, plants, subscriptions: 0 })
      assert.deepEqual(await readAll(url), written)
    })

    test('reads one account alone: its tokens, plants and subscriptions', async () => {
      const url = await empty()
      await writeAll(url, [...madeUp(40)])
      const storage = await opened(url)
      const subscription = { url: 'https://example.com/h', secret: newSigningSecret(), eventTypes: ['plant.created'] }
      await storage.webhooks.createSubscription({ ...subscription, id: newSubscriptionId(), accountName: 'first' })
      await storage.webhooks.createSubscription({ ...subscription, id: newSubscriptionId(), accountName: 'second' })
      const second = await readAll(url, 'second')
      assert.deepEqual(
        [...new Set(second.map((entry) => (entry.type === 'account' ? entry.name : entry.account)))],
        ['second'],
      )
      assert.deepEqual(
        second.map((entry) => entry.type).filter((type, i, all) => all.indexOf(type) === i),
        ['account', 'token', 'plant', 'subscription'],
      )
      assert.equal(second.filter((entry) => entry.type === 'plant').length, 20)
    })

    test('keeps a disabled subscription disabled, with its reason and time', async () => {
      const source = await freshStorage(backend, {
        migrate: true,
        limits: {
          plantsPerAccount: 0,
          subscriptionsPerAccount: 0,
          queuedPerSubscription: 1,
          idempotencyKeysPerAccount: 0,
        },
      })
      disposals.push(source.dispose)
      const id = newSubscriptionId()
      const secret = newSigningSecret()
      await source.storage.webhooks.createSubscription({
        id,
        accountName: 'hooked',
        url: 'https://example.com/full',
        secret,
        eventTypes: ['plant.created'],
      })
      const account = await source.storage.tokens.accountId('hooked')
      for (const plant of [1n, 2n]) {
        await source.storage.plants.create(account, { id: plant, name: 'p', tag: null }, plantCreated)
      }
      const [before] = await source.storage.webhooks.listSubscriptions()
      assert.equal(before?.state, 'disabled')
      const url = await empty()
      const entries = await readAll(source.url)
      assert.equal(entries.find((entry) => entry.type === 'subscription')?.secret, secret)
      await writeAll(url, entries)
      const storage = await opened(url)
      const [after] = await storage.webhooks.listSubscriptions()
      assert.deepEqual(
        [after?.id, after?.state, after?.disabledReason, after?.disabledAt, after?.queued],
        [id, 'disabled', 'backlog', before?.disabledAt, 0],
      )
    })

    test('rebuilds the counts quotas rely on: plants, tokens and subscriptions per account', async () => {
      const url = await empty()
      await writeAll(url, [...madeUp(40)])
      const limits = {
        plantsPerAccount: 21,
        subscriptionsPerAccount: 1,
        queuedPerSubscription: 0,
        idempotencyKeysPerAccount: 0,
      }
      const storage = await opened(url, { migrate: false, limits })
      const first = await storage.tokens.accountId('first')
      assert.equal(await storage.plants.create(first, { id: 1n, name: 'one more', tag: null }, plantCreated), 'created')
      await assert.rejects(
        storage.plants.create(first, { id: 4n, name: 'over', tag: null }, plantCreated),
        QuotaExceededError,
      )
      // The account holds one live token: a quota of 2 takes one more, then refuses.
      await storage.tokens.create(mintToken({ accountName: 'first' }).record, 2)
      await assert.rejects(storage.tokens.create(mintToken({ accountName: 'first' }).record, 2), QuotaExceededError)
    })
  })
}

/** An export's lines: the header, `records` (each a line's object, or its raw bytes) and the end line counting them. */
function exportOf(records: Array<Record<string, unknown> | Buffer>): Buffer {
  const counts = { accounts: 0, tokens: 0, plants: 0, subscriptions: 0 }
  for (const record of records) {
    const type = Buffer.isBuffer(record) ? /"type":"(\w+)"/.exec(record.toString('latin1'))![1] : record.type
    counts[`${type as RecordType}s`]++
  }
  const header = {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    exportedAt: '2026-01-01T00:00:00.000Z',
    account: null,
  }
  const lines = [header, ...records, { type: 'end', counts }]
  return Buffer.concat(lines.flatMap((line) => [Buffer.isBuffer(line) ? line : Buffer.from(JSON.stringify(line)), LF]))
}
const LF = Buffer.from('\n')

/** Imports `chunks` (an export's bytes, in the pieces a pipe gives) as plantstore import does: read, checked, written. */
function importBytes(url: string, ...chunks: Buffer[]) {
  return writeAll(url, new EntryReader({ allowPrivate: false }).entries(lines(Readable.from(chunks))))
}

const CREATED = '2026-01-01T00:00:00.000Z'
const accountLine = (name: string) => ({ type: 'account', name, createdAt: CREATED })
/** A token line of `account` for `record` (a new token by default), made by `createdBy`. */
const tokenLine = (
  account: string,
  createdBy: string | null = null,
  record = mintToken({ accountName: account }).record,
) => ({
  type: 'token',
  id: record.id,
  account,
  secretHash: record.secretHash.toString('base64url'),
  scopes: ['plants:read', 'tokens:manage'],
  label: null,
  createdAt: CREATED,
  expiresAt: null,
  revokedAt: null,
  createdBy,
})
const subscriptionLine = (account: string, url: string) => ({
  type: 'subscription',
  id: newSubscriptionId(),
  account,
  url,
  secret: newSigningSecret(),
  eventTypes: ['plant.created'],
  createdAt: CREATED,
  state: 'active',
  disabledReason: null,
  disabledAt: null,
})

for (const backend of backends) {
  describe(`import checks what the API checks (${backend.name})`, () => {
    let url: string
    let dispose: () => Promise<void>
    // One store for every refusal: each leaves it empty, as the next one needs it.
    before(async () => {
      ;({ url, dispose } = await backend.createDatabase())
    })
    after(() => dispose())

    /** Imports `input`, expecting its refusal with `message`; the store holds nothing after. Returns the message. */
    async function refusedWith(message: RegExp, ...input: Buffer[]): Promise<string> {
      let said = ''
      await assert.rejects(importBytes(url, ...input), (err: Error) => {
        said = err.message
        assert.match(said, message)
        return true
      })
      assert.deepEqual(await readAll(url), [])
      return said
    }

    for (const [what, hook, problem] of [
      ['that is no URL', 'not a url', 'is not a URL'],
      ['that is not http(s)', 'ftp://hooks.example.com/plants', 'must be http or https'],
      ['with credentials', 'https://ops:hunter2@hooks.example.com/plants', 'must not carry credentials'],
      ['with a control character', 'https://hooks.example.com/\u001b[2J', 'expected text without control characters'],
      ['over 2048 characters', `https://hooks.example.com/${'a'.repeat(2048)}`, 'is over 2048 characters'],
      [
        'a private address',
        'http://10.1.2.3:8080/plants',
        'host 10.1.2.3 is not a public address (PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it)',
      ],
    ] as const) {
      test(`refuses a subscription whose URL is ${what}, naming its line and not the URL, and writes nothing`, async () => {
        const subscription = subscriptionLine('hooked', hook)
        const input = exportOf([accountLine('hooked'), tokenLine('hooked'), subscription])
        const message = new RegExp(`^line 4: subscription ${subscription.id}: url: ${problem.replace(/[()]/g, '\\$&')}`)
        assert.ok(!(await refusedWith(message, input)).includes(hook))
      })
    }

    test("refuses a token whose maker is another account's token, before it or after it", async () => {
      const theirs = tokenLine('attacker')
      const ours = tokenLine('victim', theirs.id)
      const accounts = [accountLine('attacker'), accountLine('victim')]
      await refusedWith(
        new RegExp(`^line 5: token ${ours.id}: createdBy: ${theirs.id} is a token of another account$`),
        exportOf([...accounts, theirs, ours]),
      )
      await refusedWith(
        new RegExp(`^line 5: token ${theirs.id} after a token it made \\(a maker comes before the tokens it made\\)$`),
        exportOf([...accounts, ours, theirs]),
      )
    })

    test('refuses a token that names itself as its maker', async () => {
      const { record } = mintToken({ accountName: 'loop' })
      await refusedWith(
        new RegExp(`^line 3: token ${record.id}: createdBy: the token itself$`),
        exportOf([accountLine('loop'), tokenLine('loop', record.id, record)]),
      )
    })

    test('refuses a line that is not valid UTF-8, naming it, instead of storing U+FFFD', async () => {
      const plant = (name: Buffer) =>
        Buffer.concat([
          Buffer.from('{"type":"plant","account":"grower","id":"1","name":"'),
          name,
          Buffer.from('","tag":null}'),
        ])
      // A stray continuation byte, an overlong "/", a UTF-16 surrogate encoded, a sequence cut short.
      for (const bad of ['ff', 'c0af', 'eda080', 'e282']) {
        await refusedWith(
          /^line 3: not valid UTF-8$/,
          exportOf([accountLine('grower'), plant(Buffer.from(bad, 'hex'))]),
        )
      }
    })

    test('imports a character split between two reads, and a token whose maker the store no longer holds', async () => {
      const { url: store, dispose: disposeStore } = await backend.createDatabase()
      try {
        // What a store keeps of a token whose maker was deleted: its maker's id, the token refused through it.
        const { record } = mintToken({ accountName: 'grower' })
        const orphan = tokenLine('grower', mintToken({ accountName: 'grower' }).record.id, record)
        const plant = { type: 'plant', account: 'grower', id: '1', name: 'Ficus 🌿', tag: null }
        const input = exportOf([accountLine('grower'), orphan, plant])
        const split = input.indexOf(Buffer.from('🌿')) + 2
        await importBytes(store, input.subarray(0, split), input.subarray(split))
        const storage = await openStorage(store, { migrate: false })
        try {
          const grower = await storage.tokens.accountId('grower')
          assert.deepEqual(await listPlants(storage.plants, grower, { limit: 10 }), [
            { id: 1n, name: 'Ficus 🌿', tag: null },
          ])
          assert.ok(await refused(storage, record), 'a token whose maker is gone stays refused')
        } finally {
          await storage.close()
        }
      } finally {
        await disposeStore()
      }
    })
  })
}
