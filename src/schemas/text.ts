import { Type, type StringOptions, type TString } from '@sinclair/typebox'
import { TEXT, type TextRule } from '../text-rules.js'

/** A string every storage backend keeps exactly as sent, checked against `rule` (TEXT when not given). */
export function Text(options: StringOptions, rule: TextRule = TEXT): TString {
  return Type.String({ ...options, pattern: rule.pattern })
}
