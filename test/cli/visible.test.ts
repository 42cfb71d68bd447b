import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { visible } from '../../src/cli/visible.js'

describe('visible, the escaping of everything the CLI prints', () => {
  for (const [what, text, shown] of [
    ['ESC', 'a\u001b[31mb', 'a\\x1b[31mb'],
    ['NUL, BEL and DEL', '\u0000\u0007\u007f', '\\x00\\x07\\x7f'],
    ['tab, LF and CR', '\t\n\r', '\\t\\n\\r'],
    ['C1 controls (NEL, CSI)', '\u0085\u009b', '\\x85\\x9b'],
    ['line and paragraph separators', '\u2028\u2029', '\\u2028\\u2029'],
    ['bidi overrides and isolates', '\u202eabc\u2066', '\\u202eabc\\u2066'],
    ['zero-width characters and the BOM', '\u200b\u200d\ufeff', '\\u200b\\u200d\\ufeff'],
    ['a lone surrogate', 'a\ud800b\udc00', 'a\\ud800b\\udc00'],
    ['a format character beyond U+FFFF', '\u{e0041}', '\\u{e0041}'],
    ['a backslash, so an escape in the text cannot pass for one made here', 'C:\\x1b', 'C:\\\\x1b'],
  ] as const) {
    test(`escapes ${what}`, () => {
      assert.equal(visible(text), shown)
    })
  }

  test('keeps printable text as it is: ASCII, accents, CJK, emoji, spaces', () => {
    const text = 'https://8.8.8.8/plänts/盆栽/\u{1f331}?a=b c'
    assert.equal(visible(text), text)
  })
})
