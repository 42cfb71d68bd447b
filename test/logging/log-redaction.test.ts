import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { describe, test } from 'node:test'
import { redactingLogger, redactRequestUrl, withoutSecrets } from '../../src/logging/log-redaction.js'

const SECRET = 'pst_theSecretPartOfTheToken0123456789abcdefgh'
const authorization = `Bearer ${SECRET}`

function capture() {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk))
      done()
    },
  })
  return { logger: redactingLogger({ level: 'debug' }, stream), lines }
}

describe('log redaction', () => {
  test('censors Authorization in a message’s interpolated arguments', () => {
    const { logger, lines } = capture()
    logger.info('upstream said %o and %j', { headers: { authorization } }, { req: { headers: { authorization } } })
    assert.equal(lines.length, 1)
    assert.ok(!lines[0]!.includes(SECRET), lines[0])
    assert.match(lines[0]!, /\[Redacted\]/)
  })

  test('censors it in the bindings of a child’s child, under any key', () => {
    const { logger, lines } = capture()
    logger
      .child({ job: 'sync' })
      .child({ upstream: { headers: { authorization } } })
      .warn('retrying')
    logger.child({ headers: { authorization } }).info('bound at the top level')
    assert.equal(lines.length, 2)
    for (const line of lines) assert.ok(!line.includes(SECRET), line)
    assert.deepEqual(JSON.parse(lines[0]!).upstream, { headers: { authorization: '[Redacted]' } })
  })

  test('leaves the logged object itself untouched, and keeps its other headers', () => {
    const { logger, lines } = capture()
    const request = { headers: { authorization, accept: 'application/json' } }
    logger.info({ request }, 'seen')
    assert.equal(request.headers.authorization, authorization)
    assert.deepEqual(JSON.parse(lines[0]!).request.headers, { authorization: '[Redacted]', accept: 'application/json' })
  })

  test('keeps an Error an Error, message and stack, when one of its fields carries the header', () => {
    const { logger, lines } = capture()
    const error = Object.assign(new Error('upstream refused'), { request: { headers: { authorization } } })
    logger.error(error)
    const line = JSON.parse(lines[0]!) as { msg?: string; err?: { stack?: string }; stack?: string }
    assert.ok(!lines[0]!.includes(SECRET), lines[0])
    assert.equal(line.msg, 'upstream refused')
    assert.match(String(line.err?.stack ?? line.stack), /upstream refused\n\s+at /)
    assert.equal(error.request.headers.authorization, authorization, 'the caller’s error is left alone')
  })

  test('censors headers that are read-only on the logged object', () => {
    const { logger, lines } = capture()
    const frozen = Object.freeze({ headers: Object.freeze({ authorization }) })
    assert.doesNotThrow(() => logger.info({ upstream: frozen }, 'frozen'))
    assert.ok(!lines[0]!.includes(SECRET), lines[0])
  })

  test('hands back a line without headers as it is, with no copy made', () => {
    const fields = { method: 'GET', status: 200, route: null, nested: { a: 1 } }
    assert.equal(withoutSecrets(fields), fields)
    assert.equal(withoutSecrets('text'), 'text')
    assert.equal(withoutSecrets(null), null)
  })

  test('redacts a credential in a URL in any spelling, and leaves a URL without one as it is', () => {
    assert.equal(redactRequestUrl(`/plants?ACCESS_TOKEN=x&limit=5`), '/plants?ACCESS_TOKEN=[Redacted]&limit=5')
    assert.equal(redactRequestUrl(`/plants?q=Bearer+${SECRET}`), '/plants?q=[Redacted]')
    assert.equal(redactRequestUrl(`/plants?${SECRET}`), '/plants?[Redacted]')
    assert.equal(redactRequestUrl(`/tokens/%70st_${SECRET.slice(4)}/x`), '/tokens/[Redacted]/x')
    for (const name of [
      'access_token[]',
      'token%5B0%5D',
      'id_token',
      'api_key',
      'apiKey',
      'client_secret',
      'password',
    ]) {
      assert.equal(redactRequestUrl(`/plants?${name}=opaque&limit=5`), `/plants?${name}=[Redacted]&limit=5`, name)
    }
    for (const url of [
      '/plants',
      '/plants?limit=10&tag=%FF&fields=id,name',
      '/plants?tag=monkey&after=5',
      '/tokens/tok_0123456789abcdef',
      '/?',
    ]) {
      assert.equal(redactRequestUrl(url), url)
    }
  })
})
