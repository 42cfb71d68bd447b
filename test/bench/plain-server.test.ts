import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { countPlants, insertPlants } from '../../bench/bulk-seed.js'
import { Cleanup } from '../../bench/cleanup.js'
import { getPage } from '../../bench/http.js'
import { pageBody } from '../../bench/plants.js'
import { prepareRuntimes } from '../../bench/runtimes.js'
import { startPlain, type Server } from '../../bench/servers.js'
import { encodeCursor } from '../../src/routes/cursor.js'
import { backends, freshStorage } from '../helpers/backends.js'

const ACCOUNT = 'bench-list'
const PLANTS = 60

function send(url: string, method: string, path: string, token: string, body?: object): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` }
    if (body) headers['content-type'] = 'application/json'
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.once('error', reject)
    req.end(body && JSON.stringify(body))
  })
}

for (const backend of backends) {
  describe(`the benchmark's plain handler (${backend.name})`, () => {
    const token = randomBytes(32).toString('base64url')
    const cleanup = new Cleanup()
    let database: Awaited<ReturnType<typeof freshStorage>>
    let server: Server
    let dir: string

    before(async () => {
      // The service's schema with one account holding plants 1..PLANTS, as the benchmark seeds it.
      database = await freshStorage(backend)
      const secretHash = randomBytes(32)
      await database.storage.tokens.create({
        ...{ id: randomUUID(), accountName: ACCOUNT, secretHash, scopes: ['plants:read', 'plants:write'] },
        ...{ label: null, expiresAt: null, createdBy: null },
      })
      await insertPlants(database.url, ACCOUNT, { start: 1, end: PLANTS + 1 })
      dir = mkdtempSync(join(tmpdir(), 'plantstore-plain-'))
      const context = { cpu: undefined, tmpDir: dir, cleanup }
      const [runtime] = await prepareRuntimes([], context, () => {})
      server = await startPlain('plain', database.url, ACCOUNT, token, context, runtime!)
    })
    after(async () => {
      await cleanup.run()
      await database.dispose()
      rmSync(dir, { recursive: true, force: true })
    })

    test('refuses a request without the token, or with another of the same length', async () => {
      assert.equal((await getPage(server.url, '', '/plants?limit=20')).status, 401)
      const other = token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A')
      assert.equal((await getPage(server.url, other, '/plants?limit=20')).status, 401)
    })

    test("serves the service's keyset pages byte for byte, with its cursors", async () => {
      const first = await getPage(server.url, token, '/plants?limit=20')
      assert.equal(first.body, pageBody(0))
      assert.equal(first.link, `</plants?limit=20&cursor=${encodeCursor(20n)}>; rel="next"`)
      const next = await getPage(server.url, token, `/plants?limit=20&cursor=${encodeCursor(20n)}`)
      assert.equal(next.body, pageBody(20))
      const last = await getPage(server.url, token, `/plants?limit=20&cursor=${encodeCursor(40n)}`)
      assert.deepEqual([last.body, last.link], [pageBody(40), undefined])
      assert.equal((await getPage(server.url, token, '/plants?cursor=bm90LWEtY3Vyc29y')).status, 400)
    })

    test('stores a created plant before answering, refuses its id again, and deletes it', async () => {
      const plant = { id: 1_000_001, name: 'Sweet basil', tag: 'herb' }
      assert.equal(await send(server.url, 'POST', '/plants', token, plant), 200)
      assert.equal(await countPlants(database.url, ACCOUNT), PLANTS + 1)
      assert.equal(await send(server.url, 'POST', '/plants', token, plant), 409)
      assert.equal(await send(server.url, 'DELETE', `/plants/${plant.id}`, token), 204)
      assert.equal(await countPlants(database.url, ACCOUNT), PLANTS)
      assert.equal(await send(server.url, 'DELETE', `/plants/${plant.id}`, token), 404)
    })
  })
}
