import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { mintToken, type TokenRequest } from '../../src/auth/issue-token.js'
import { LINEAGE_DEPTH, type NewToken, type StoredToken, type TokenStore } from '../../src/storage/types.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { unmarkToken } from '../helpers/unmark-token.js'

/** Stores a token of `accountName` made by `maker` (none: made otherwise). */
async function make(tokens: TokenStore, accountName: string, maker?: NewToken, extra: Partial<TokenRequest> = {}) {
  const { record } = mintToken({ accountName, createdBy: maker?.id ?? null, ...extra })
  await tokens.create(record)
  return record
}

/** What find says of `token`: ended when revoked or expired. */
async function ended(tokens: TokenStore, token: NewToken, now = Date.now()): Promise<boolean> {
  const found = (await tokens.find(token.secretHash)) as StoredToken
  assert.ok(found !== undefined, `${token.id} is found`)
  return found.revokedAt !== null || (found.expiresAt !== null && found.expiresAt.getTime() <= now)
}

for (const backend of backends) {
  describe(`token lineage (${backend.name})`, () => {
    let tokens: TokenStore
    let url: string
    let dispose: () => Promise<void>
    before(async () => {
      const fresh = await freshStorage(backend)
      tokens = fresh.storage.tokens
      url = fresh.url
      dispose = fresh.dispose
    })
    after(() => dispose())

    test('records the maker of a token and lists it; a token made otherwise has none', async () => {
      const root = await make(tokens, 'listed')
      const made = await make(tokens, 'listed', root)
      const listed = await tokens.list('listed')
      assert.deepEqual(
        listed.map((token) => [token.id, token.createdBy]),
        [
          [root.id, null],
          [made.id, root.id],
        ],
      )
      assert.equal((await tokens.find(made.secretHash))?.createdBy, root.id)
    })

    test('revoking a maker refuses it and every token it made, transitively, while its own maker stays', async () => {
      const a = await make(tokens, 'chain')
      const m = await make(tokens, 'chain', a)
      const c = await make(tokens, 'chain', m)
      const g = await make(tokens, 'chain', c)
      assert.equal(await ended(tokens, g), false)
      assert.equal(await tokens.revoke(m.id), true)
      assert.deepEqual(await Promise.all([a, m, c, g].map((token) => ended(tokens, token))), [false, true, true, true])
      const listed = new Map((await tokens.list('chain')).map((token) => [token.id, token.revokedAt !== null]))
      assert.deepEqual(
        [a, m, c, g].map((token) => listed.get(token.id)),
        [false, true, true, true],
      )
    })

    test('stores no token made by a maker revoked or deleted: MakerEndedError', async () => {
      const revoked = await make(tokens, 'late')
      await tokens.revoke(revoked.id)
      // As when the maker, trusted from cache for a moment after its revocation, makes one more.
      await assert.rejects(make(tokens, 'late', revoked), { name: 'MakerEndedError', makerId: revoked.id })
      const removed = await make(tokens, 'late')
      await tokens.remove(removed.id, (await tokens.find(removed.secretHash))!.accountId)
      await assert.rejects(make(tokens, 'late', removed), { name: 'MakerEndedError', makerId: removed.id })
      assert.equal((await tokens.list('late')).length, 1, 'only the revoked maker')
    })

    test('refuses a token that the revocation of its maker did not mark (made while it ran)', async () => {
      const m = await make(tokens, 'missed')
      const c = await make(tokens, 'missed', m)
      await tokens.revoke(m.id)
      await unmarkToken(url, c.id)
      assert.equal(await ended(tokens, c), true)
    })

    test('deleting a maker ends every token it made, transitively, kept revoked with their maker named', async () => {
      const a = await make(tokens, 'removed')
      const m = await make(tokens, 'removed', a)
      const c = await make(tokens, 'removed', m)
      const g = await make(tokens, 'removed', c)
      const { accountId } = (await tokens.find(m.secretHash))!
      assert.equal(await tokens.remove(m.id, accountId), true)
      assert.equal(await tokens.find(m.secretHash), undefined)
      assert.deepEqual(await Promise.all([a, c, g].map((token) => ended(tokens, token))), [false, true, true])
      const listed = await tokens.list('removed')
      const child = listed.find((token) => token.id === c.id)
      assert.ok(child?.revokedAt instanceof Date, 'the child is listed revoked')
      assert.equal(child.createdBy, m.id)
    })

    test('refuses a token whose maker is deleted, even one the deletion did not mark', async () => {
      const m = await make(tokens, 'orphan')
      const c = await make(tokens, 'orphan', m)
      assert.equal(await tokens.remove(m.id, (await tokens.find(m.secretHash))!.accountId), true)
      await unmarkToken(url, c.id)
      assert.equal(await ended(tokens, c), true)
    })

    test('an expired maker ends the tokens it made, even one stored with a later expiry', async () => {
      const m = await make(tokens, 'expiring', undefined, { expiresAt: new Date(Date.now() + 1000) })
      const c = await make(tokens, 'expiring', m, { expiresAt: new Date(Date.now() + 86_400_000) })
      const g = await make(tokens, 'expiring', c)
      const later = Date.now() + 1500
      assert.equal(await ended(tokens, c), false)
      assert.equal(await ended(tokens, c, later), true)
      assert.equal(await ended(tokens, g, later), true)
    })

    test(`refuses a token more than ${LINEAGE_DEPTH} makers away from a token made otherwise`, async () => {
      const chain = [await make(tokens, 'deep')]
      for (let depth = 1; depth <= LINEAGE_DEPTH + 1; depth++) chain.push(await make(tokens, 'deep', chain.at(-1)))
      assert.equal(await ended(tokens, chain[LINEAGE_DEPTH]!), false)
      assert.equal(await ended(tokens, chain[LINEAGE_DEPTH + 1]!), true)
    })

    test('revoking or deleting a maker frees its descendants from the token quota', async () => {
      const quota = 3
      const create = (maker?: NewToken) => {
        const { record } = mintToken({ accountName: 'quota-chain', createdBy: maker?.id ?? null })
        return tokens.create(record, quota).then(() => record)
      }
      const a = await create()
      const m = await create(a)
      await create(m)
      await assert.rejects(create(), { name: 'QuotaExceededError' })
      await tokens.revoke(m.id)
      const m2 = await create(a)
      await create(m2)
      await assert.rejects(create(), { name: 'QuotaExceededError' })
      assert.equal(await tokens.remove(m2.id, (await tokens.find(m2.secretHash))!.accountId), true)
      await create()
      await create()
      await assert.rejects(create(), { name: 'QuotaExceededError' })
    })
  })
}
