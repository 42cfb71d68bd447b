import assert from 'node:assert/strict'
import { statSync } from 'node:fs'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import Database from 'better-sqlite3'
import { StorageUnavailableError } from '../../../src/storage/index.js'
import { GroupCommit } from '../../../src/storage/sqlite/group-commit.js'
import { open } from '../../../src/storage/sqlite/index.js'
import { plantCreated } from '../../../src/webhooks/events.js'
import { listPlants } from '../../helpers/plants.js'

const WAL_HEADER = 32
const FRAME = 24 + 4096

describe('SQLite group commit', () => {
  let dir: string
  let file: string
  let db: Database.Database
  let writes: GroupCommit
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'plantstore-group-commit-'))
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  function openFresh(name: string): void {
    file = join(dir, name)
    db = new Database(file)
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = FULL')
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)')
    db.pragma('wal_checkpoint(TRUNCATE)')
    writes = new GroupCommit(db)
  }

  const insert = (id: number, v: string | null) => () => db.prepare('INSERT INTO t (id, v) VALUES (?, ?)').run(id, v)

  test('commits writes issued in the same turn as one transaction', async () => {
    openFresh('one-commit.db')
    await Promise.all(Array.from({ length: 100 }, (_, i) => writes.run(insert(i, `v${i}`))))
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), 100)
    // One commit rewrites the table's page once; 100 commits would append at least 100 frames to the WAL.
    const frames = (statSync(`${file}-wal`).size - WAL_HEADER) / FRAME
    assert.ok(frames <= 3, `expected one commit's frames in the WAL, found ${frames}`)
    db.close()
  })

  test('rolls back only the failing write of a batch and reports its error to its caller', async () => {
    openFresh('isolated.db')
    const results = await Promise.allSettled([
      writes.run(insert(1, 'a')),
      writes.run(insert(2, null)),
      writes.run(insert(3, 'c')),
    ])
    assert.deepEqual(
      results.map((result) => result.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    )
    assert.match(String((results[1] as PromiseRejectedResult).reason), /NOT NULL/)
    assert.deepEqual(db.prepare('SELECT id FROM t ORDER BY id').pluck().all(), [1, 3])
    db.close()
  })

  test('answers every write of a batch with 503-class unavailability when the write lock is held elsewhere', async () => {
    openFresh('locked.db')
    db.pragma('busy_timeout = 50')
    const other = new Database(file)
    other.prepare('BEGIN IMMEDIATE').run()
    try {
      const results = await Promise.allSettled([writes.run(insert(1, 'a')), writes.run(insert(2, 'b'))])
      for (const result of results) {
        assert.equal(result.status, 'rejected')
        assert.ok((result as PromiseRejectedResult).reason instanceof StorageUnavailableError)
      }
    } finally {
      other.prepare('ROLLBACK').run()
      other.close()
    }
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), 0)
    db.close()
  })

  test('rolls back the whole batch and fails every write in it with unavailability when the disk is full', async () => {
    openFresh('full.db')
    const pages = db.pragma('page_count', { simple: true }) as number
    db.pragma(`max_page_count = ${pages + 2}`)
    const big = 'x'.repeat(3000)
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => writes.run(insert(i, big))))
    for (const result of results) {
      assert.equal(result.status, 'rejected')
      assert.ok((result as PromiseRejectedResult).reason instanceof StorageUnavailableError)
    }
    assert.equal(db.inTransaction, false)
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), 0, 'nothing of the failed batch is kept')
    db.close()
  })

  test('commits every write of a turn larger than one batch, each answered with its own result', async () => {
    openFresh('many.db')
    const results = await Promise.all(
      Array.from({ length: 600 }, (_, i) => writes.run(() => insert(i, `v${i}`)().changes)),
    )
    assert.deepEqual(results, Array<number>(600).fill(1))
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), 600)
    db.close()
  })

  test('refuses to acknowledge writes while the connection is inside a transaction it did not open', async () => {
    openFresh('nested.db')
    db.prepare('BEGIN').run()
    const result = await Promise.allSettled([writes.run(insert(1, 'a'))])
    assert.equal(result[0]!.status, 'rejected')
    db.prepare('ROLLBACK').run()
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), 0)
    db.close()
  })

  test('acknowledges a write only once another connection can read it', async () => {
    openFresh('visible.db')
    const reader = new Database(file, { readonly: true })
    const count = reader.prepare('SELECT count(*) FROM t').pluck()
    const pending = writes.run(insert(1, 'a'))
    assert.equal(count.get(), 0, 'nothing is committed before the batch runs')
    await pending
    assert.equal(count.get(), 1)
    reader.close()
    db.close()
  })

  test('close() commits writes still queued instead of dropping them', async () => {
    const storeFile = join(dir, 'close.db')
    const storage = await open(storeFile, { migrate: true })
    const token = await storage.tokens.create({
      id: 'tok_close',
      accountName: 'acme',
      secretHash: Buffer.alloc(32, 1),
      scopes: [],
      label: null,
      expiresAt: null,
      createdBy: null,
    })
    const created = storage.plants.create(token.accountId, { id: 7n, name: 'kept', tag: null }, plantCreated)
    await storage.close()
    assert.equal(await created, 'created')
    const reopened = await open(storeFile, { migrate: true })
    assert.deepEqual(await listPlants(reopened.plants, token.accountId, { limit: 10 }), [
      { id: 7n, name: 'kept', tag: null },
    ])
    await reopened.close()
  })
})
