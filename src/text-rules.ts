/**
 * The characters stored text may hold. The API's schemas enforce these rules (schemas/text.ts) and code that reads
 * input through no schema (a webhook URL at connection time, a command line) checks them here, so both say the same.
 */

/** A rule on the characters of a string: the schema pattern that enforces it and the words that explain it. */
export interface TextRule {
  pattern: string
  description: string
}

/**
 * Any UTF-16 unit but `forbidden` and the surrogates, or a surrogate pair (one character beyond U+FFFF). Every rule
 * is made here, so they all treat surrogates alike and differ only in what else they forbid.
 */
function textRule(forbidden: string, description: string): TextRule {
  return { pattern: `^(?:[^${forbidden}\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])*$`, description }
}

/**
 * No NUL character and no unpaired UTF-16 surrogate: PostgreSQL cannot store NUL, and an unpaired
 * surrogate has no UTF-8 form, so either would come back changed (or not be stored at all).
 */
export const TEXT = textRule('\\u0000', 'text without NUL characters or unpaired surrogates')

/**
 * TEXT without any control character either (C0, NUL included, DEL and C1): for text that operators see in a
 * terminal, where ESC starts an escape sequence and CR or LF forges a line.
 */
export const CONTROL_FREE_TEXT = textRule(
  '\\u0000-\\u001f\\u007f-\\u009f',
  'text without control characters (U+0000 to U+001F, U+007F to U+009F) or unpaired surrogates',
)

/**
 * An Idempotency-Key: a Structured Field string (draft-ietf-httpapi-idempotency-key-header) or, as many clients send
 * it, the same text unquoted; 1 to 255 visible ASCII characters but the quote, backslash and comma, so that a key sent
 * twice (joined with ", ") is refused instead of read as another key.
 */
export const IDEMPOTENCY_KEY: TextRule = {
  pattern: '^(?:[\\x21\\x23-\\x2b\\x2d-\\x5b\\x5d-\\x7e]{1,255}|"[\\x21\\x23-\\x2b\\x2d-\\x5b\\x5d-\\x7e]{1,255}")$',
  description: '1 to 255 visible ASCII characters other than " \\ and comma, optionally in double quotes, sent once',
}

/** Every rule, for the validator to word its errors. */
export const TEXT_RULES: readonly TextRule[] = [TEXT, CONTROL_FREE_TEXT, IDEMPOTENCY_KEY]

/** What a validation error says of a string that breaks `rule`. */
export function expected(rule: TextRule): string {
  return `expected ${rule.description}`
}

/**
 * What a validation error would say of `value`, or undefined when it keeps `rule`: for input that comes through no
 * schema, such as a command line. The same pattern with the same (no) flags as TypeBox's compiled check.
 */
export function textProblem(value: string, rule: TextRule): string | undefined {
  return new RegExp(rule.pattern).test(value) ? undefined : expected(rule)
}
