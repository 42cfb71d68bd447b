import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { redactUrl } from '../src/redact.js'

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

  test('hides the password of a URL naming several hosts, in its user part or its query', () => {
    assert.equal(
      redactUrl('postgres://app:hunter2@h1:5432,h2:5433/plants?target_session_attrs=read-write'),
      'postgres://***@h1:5432,h2:5433/plants?target_session_attrs=read-write',
    )
    assert.equal(
      redactUrl('postgres://h1:5432,h2:5433/plants?user=app&password=hunter2&sslpassword=k3y&sslmode=require'),
      'postgres://h1:5432,h2:5433/plants?user=app&password=***&sslpassword=***&sslmode=require',
    )
  })

  test('leaves URLs without a secret exactly as given', () => {
    for (const url of ['sqlite:./data/plantstore.db', 'postgres://postgres@127.0.0.1:5432/test?search_path=x']) {
      assert.equal(redactUrl(url), url)
    }
  })
})
