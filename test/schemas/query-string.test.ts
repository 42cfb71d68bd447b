import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { MALFORMED_PARAMETER, parseQueryString } from '../../src/schemas/query-string.js'

describe('parseQueryString', () => {
  test('decodes names and values, a plus as a space', () => {
    assert.deepEqual({ ...parseQueryString('tag=red%20fern&name=a+b') }, { tag: 'red fern', name: 'a b' })
  })

  test('gathers a repeated parameter into an array, in order', () => {
    assert.deepEqual({ ...parseQueryString('tag=a&tag=b&tag=c') }, { tag: ['a', 'b', 'c'] })
  })

  test('keeps __proto__ as a parameter of its own, without touching any prototype', () => {
    const parsed = parseQueryString('__proto__=1&constructor=2')
    assert.equal(Object.prototype.isPrototypeOf(parsed), false)
    assert.equal('toString' in parsed, false)
    assert.deepEqual(Object.keys(parsed), ['__proto__', 'constructor'])
    assert.equal(parsed['__proto__'], '1')
    assert.equal(({} as Record<string, unknown>)['1'], undefined)
  })

  test('leaves out a parameter with broken percent-encoding and names it for the validator', () => {
    const parsed = parseQueryString('limit=5&tag=%FF&x=%E0%A4')
    assert.deepEqual(Object.keys(parsed), ['limit'])
    assert.equal(parsed[MALFORMED_PARAMETER], 'tag')
  })

  test('names a parameter whose name is broken by its name as sent', () => {
    assert.equal(parseQueryString('%ZZ=1')[MALFORMED_PARAMETER], '%ZZ')
  })

  test('takes a parameter without = as empty and skips empty pairs', () => {
    assert.deepEqual({ ...parseQueryString('&after&&limit=3&') }, { after: '', limit: '3' })
    assert.deepEqual({ ...parseQueryString('') }, {})
  })
})
