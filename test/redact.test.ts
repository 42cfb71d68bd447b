import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { redactAuthorization, redactUrl } from '../src/redact.js'

describe('redactUrl', () => {
  const cases: Array<[string, string, string]> = [
    ['a password', 'postgres://app:hunter2@db:5432/plants', 'postgres://app:***@db:5432/plants'],
    ['a password with an encoded @', 'postgres://app:p%40ss@db/plants', 'postgres://app:***@db/plants'],
    ['a raw @ in the password', 'postgres://app:p@ss@db/plants', 'postgres://app:***@db/plants'],
    [
      'a password query parameter',
      'postgres://db/plants?user=app&password=hunter2',
      'postgres://db/plants?user=app&password=***',
    ],
  ]
  for (const [what, url, expected] of cases) {
    test(`hides ${what}`, () => {
      assert.equal(redactUrl(url), expected)
    })
  }

  test('hides everything before the last @ of a URL that does not parse', () => {
    const shown = redactUrl('postgres://app:pa/ss@db:x/plants')
    assert.ok(!shown.includes('pa/ss'), shown)
    assert.equal(shown, 'postgres://***@db:x/plants')
  })

  test('leaves URLs without a secret exactly as given', () => {
    for (const url of ['sqlite:./data/plantstore.db', 'postgres://postgres@127.0.0.1:5432/test?search_path=x']) {
      assert.equal(redactUrl(url), url)
    }
  })
})

describe('redactAuthorization', () => {
  test('censors the Authorization header of the line and of any value one level down, without touching the input', () => {
    const line = {
      headers: { authorization: 'Bearer pst_secret', accept: '*/*' },
      req: { method: 'GET', headers: { authorization: 'Bearer pst_secret' } },
      status: 200,
    }
    const before = structuredClone(line)
    const shown = redactAuthorization(line)
    assert.deepEqual(shown, {
      headers: { authorization: '[Redacted]', accept: '*/*' },
      req: { method: 'GET', headers: { authorization: '[Redacted]' } },
      status: 200,
    })
    assert.deepEqual(line, before, 'the logged objects are unchanged')
  })

  test('hands back a line without an Authorization header as it is, with no copy', () => {
    const line = { method: 'GET', route: '/plants', req: { headers: { host: 'x' } }, err: null }
    assert.equal(redactAuthorization(line), line)
  })
})
