// Apart from serve.ts, so that printing it, or running any other command, never loads the HTTP stack. Made from the
// configuration schema, where each setting is defined once.
import { CONFIG_KEYS, defaultText, expectedValue, settingOf } from '../config.js'

const WIDTH = 100
const INDENT = '      '

/** `text` in lines of at most WIDTH characters, each after INDENT. */
function wrap(text: string): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line !== '' && INDENT.length + line.length + 1 + word.length > WIDTH) {
      lines.push(INDENT + line)
      line = word
    } else line = line === '' ? word : `${line} ${word}`
  }
  return [...lines, INDENT + line]
}

/** One setting: its variable and flag, then what it means, its default and what it accepts. */
function settingHelp(key: (typeof CONFIG_KEYS)[number]): string[] {
  const setting = settingOf(key)
  const description = setting.description.replaceAll('`', '')
  const fallback = defaultText(key)
  const facts = `${fallback === undefined ? 'Not set by default' : `Default ${fallback}`}; ${expectedValue(key)}.`
  return [`  ${setting.flag === undefined ? key : `${setting.flag}, ${key}`}`, ...wrap(`${description} ${facts}`)]
}

export const SERVE_HELP = [
  'Usage: plantstore serve [--port N] [--host ADDR] [--database URL] [--workers N]',
  '',
  'Runs the HTTP service. Each setting is read from its flag, else its environment variable, else its',
  'default (docs/configuration.md has the same list):',
  '',
  ...CONFIG_KEYS.flatMap(settingHelp),
].join('\n')
