import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, test } from 'node:test'
import { buildApp } from '../../src/app.js'
import { issueToken } from '../../src/auth/issue-token.js'
import { connectRedis } from '../../src/limits/redis.js'
import { bearer, checkEveryResponse } from '../helpers/app.js'
import { backends, freshStorage } from '../helpers/backends.js'
import { RedisServer } from '../helpers/redis-server.js'

const cleanups: Array<() => Promise<unknown>> = []
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

test('logs every outage of the shared store when it starts and when it ends: killed, killed again within a minute, frozen', async () => {
  const server = await RedisServer.start()
  cleanups.push(() => server.kill())
  const shared = await connectRedis(server.url)
  const lines: string[] = []
  shared.logTo({ warn: (_fields, message) => lines.push(message), info: (_fields, message) => lines.push(message) })
  cleanups.push(async () => shared.redis.disconnect())
  const fresh = await freshStorage(backends[0]!)
  cleanups.push(fresh.dispose)
  const perMinute = { max: 1000, windowMs: 60_000 }
  const app = checkEveryResponse(
    await buildApp({
      storage: fresh.storage,
      rateLimit: { perToken: perMinute, perAccount: perMinute, authFailures: perMinute, redis: shared.redis },
    }),
  )
  cleanups.push(() => app.close())
  const token = bearer((await issueToken(fresh.storage, { accountName: 'a' })).secret)
  const count = (message: string) => lines.filter((line) => line.startsWith(message)).length
  /** Sends requests (each served, limited or not) until `done`; fails after 10 s. */
  const until = async (done: () => boolean, what: string) => {
    const deadline = Date.now() + 10_000
    while (!done()) {
      assert.ok(Date.now() < deadline, `${what} within 10 s; logged: ${JSON.stringify(lines)}`)
      assert.equal((await app.inject({ method: 'GET', url: '/plants', headers: token })).statusCode, 200)
      await sleep(50)
    }
  }
  await until(() => shared.redis.status === 'ready', 'connected')
  for (const outage of [1, 2]) {
    await server.kill()
    await until(() => count('redis unavailable') === outage, `outage ${outage} logged`)
    await server.restart()
    await until(() => count('redis available again') === outage, `the end of outage ${outage} logged`)
  }
  server.freeze()
  await until(() => count('redis unavailable') === 3, 'the freeze logged')
  server.thaw()
  await until(() => count('redis available again') === 3, 'the thaw logged')
  const outage = 'redis unavailable; rate limits are not enforced until it is back'
  assert.deepEqual(
    lines,
    [1, 2, 3].flatMap(() => [outage, 'redis available again']),
    'each once, in turn',
  )
})
