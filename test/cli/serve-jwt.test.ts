import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { AUDIENCE } from '../helpers/jwks-server.js'
import { startIdp, type TestIdp } from '../helpers/oidc-provider.js'
import { cleanup, http, runCli, startServer, tempDatabase, type ServerProcess } from '../helpers/server-process.js'

after(cleanup)

describe('plantstore serve with PLANTSTORE_JWT_ISSUER and PLANTSTORE_JWT_AUDIENCE', () => {
  let idp: TestIdp
  let server: ServerProcess
  before(async () => {
    idp = await startIdp({ audience: AUDIENCE, clients: ['greenhouse'] })
    server = await startServer({ env: { PLANTSTORE_JWT_ISSUER: idp.issuer, PLANTSTORE_JWT_AUDIENCE: AUDIENCE } })
  })
  after(async () => {
    await server.stop()
    await idp.close()
  })

  test('accepts an access token of the provider, found through its discovery document', async () => {
    const token = await idp.token({ clientId: 'greenhouse', scopes: ['plants:read', 'plants:write'] })
    const created = await http(server.baseUrl, 'POST', '/plants', { token, body: { id: 1, name: 'Monstera' } })
    assert.equal(created.status, 200, created.text)
    const listed = await http(server.baseUrl, 'GET', '/plants', { token })
    assert.deepEqual(JSON.parse(listed.text), [{ name: 'Monstera' }])
    await server.settle()
    assert.ok(!server.stdout.includes(token.split('.')[2]!), 'the token is never logged')
  })
})

describe('plantstore serve refuses incomplete or unsafe JWT settings', () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['an issuer without an audience', { PLANTSTORE_JWT_ISSUER: 'https://id.example.com' }, 'PLANTSTORE_JWT_AUDIENCE'],
    [
      'an issuer over plain http to another host',
      { PLANTSTORE_JWT_ISSUER: 'http://id.example.com', PLANTSTORE_JWT_AUDIENCE: 'x' },
      'PLANTSTORE_JWT_ISSUER',
    ],
    ['HMAC among the algorithms', { PLANTSTORE_JWT_ALGORITHMS: 'RS256,HS256' }, 'PLANTSTORE_JWT_ALGORITHMS'],
  ]
  for (const [what, env, key] of cases) {
    test(`exits 1 with one line naming ${key} for ${what}`, async () => {
      const result = await runCli(['serve', '--port', '0', '--database', tempDatabase()], env)
      assert.equal(result.code, 1, result.stderr)
      const lines = result.stderr.trimEnd().split('\n')
      assert.equal(lines.length, 1, result.stderr)
      assert.match(lines[0]!, new RegExp(`^plantstore: ${key}: `))
    })
  }
})
