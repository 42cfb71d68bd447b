import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, test } from 'node:test'
import { cleanup, eventually, http, startServer } from '../helpers/server-process.js'

after(cleanup)

test('with REDIS_URL unreachable the server keeps serving, without 500s, and logs the outage once', async () => {
  const token = 'redis-' + randomBytes(30).toString('base64url')
  const server = await startServer({
    env: { REDIS_URL: 'redis://127.0.0.1:1', PLANTSTORE_BOOTSTRAP_TOKEN: token, PLANTSTORE_RATE_LIMIT: '2/min' },
  })
  await eventually(async () => (await http(server.baseUrl, 'GET', '/plants', { token })).status === 200, 10_000)
  for (let i = 0; i < 5; i++) assert.equal((await http(server.baseUrl, 'GET', '/plants', { token })).status, 200)
  for (let i = 0; i < 3; i++)
    assert.equal((await http(server.baseUrl, 'GET', '/plants', { token: 'pst_bad' })).status, 401)
  await server.settle()
  assert.equal(server.stdout.match(/redis unavailable/g)?.length, 1, server.stdout)
  assert.equal(await server.stop('SIGTERM'), 0)
})
