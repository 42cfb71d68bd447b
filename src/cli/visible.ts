// A backslash, and every character a terminal may act on or that hides or reorders text: controls (C0, DEL, C1),
// format characters (bidi overrides and isolates, zero-width characters, the BOM, tags), the line and paragraph
// separators, and unpaired surrogates.
const UNSAFE = /[\\\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu

const NAMED: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }

function escape(character: string): string {
  const named = NAMED[character]
  if (named !== undefined) return named
  const code = character.codePointAt(0)!
  const hex = code.toString(16)
  if (code <= 0xff) return `\\x${hex.padStart(2, '0')}`
  return code <= 0xffff ? `\\u${hex.padStart(4, '0')}` : `\\u{${hex}}`
}

/**
 * `text` safe to print on a terminal, where stored or tenant-controlled text would otherwise send escape
 * sequences or forge lines. Escaped, as in JavaScript: a backslash as `\\` (so text that holds `\x1b` cannot pass
 * for an escape made here), tab, LF and CR as `\t`, `\n`, `\r`, other characters up to U+00FF as `\xHH` (ESC is
 * `\x1b`), other BMP characters and lone surrogates as `\uHHHH` (`\u2028`), others as `\u{HHHHH}`; hex digits in
 * lower case. Everything else, accents, CJK and emoji included, is printed as it is.
 */
export function visible(text: string): string {
  return text.replace(UNSAFE, escape)
}
