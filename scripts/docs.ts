/**
 * `npm run docs`: writes docs/configuration.md from the configuration schema (src/config.ts), where each setting is
 * defined once. test/scripts/docs.test.ts fails when the file differs from what this makes.
 */
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { format, resolveConfig } from 'prettier'
import { CONFIG_KEYS, defaultText, expectedValue, settingOf } from '../src/config.js'
import { OTEL_VARIABLES } from '../src/tracing/enabled.js'

export const CONFIGURATION_DOC = fileURLToPath(new URL('../docs/configuration.md', import.meta.url))

const cell = (text: string) => text.replaceAll('|', '\\|')

/** docs/configuration.md as it should be, formatted as the repository formats Markdown. */
export async function configurationDoc(): Promise<string> {
  const rows = CONFIG_KEYS.map((key) => {
    const setting = settingOf(key)
    const fallback = defaultText(key)
    const flag = setting.flag === undefined ? '' : `\`${setting.flag}\``
    return `| \`${key}\` | ${flag} | ${fallback === undefined ? '(none)' : `\`${fallback}\``} | ${cell(expectedValue(key))} | ${cell(setting.description)} |`
  })
  const markdown = [
    '# Configuration',
    '',
    'Generated from `src/config.ts` by `npm run docs`: edit the schema there, not this file (a test fails when they',
    'differ). `plantstore serve --help` prints the same list.',
    '',
    'Each setting is read once at start: its flag (for `plantstore serve`) over its environment variable over its',
    'default, validated against one schema; an invalid value stops the start with one line naming the variable.',
    'A variable that looks meant for the service but is none of these (any other `PLANTSTORE_` name, or one a slip',
    'away from a setting, such as `DATABSE_URL`) gets a warning line at start naming the closest setting',
    '(`plantstore: PLANTSTORE_RATELIMIT: not a setting; did you mean PLANTSTORE_RATE_LIMIT?`), and the start goes on;',
    'but one taken for `DATABASE_URL` while `DATABASE_URL` is unset (and no `--database` given) stops every command',
    'with that line instead, so that a misspelling never opens the default store, a new and empty one.',
    "`PLANTSTORE_TEST_` and `PLANTSTORE_BENCH_` names are the suite's and the benchmark's (docs/reliability.md).",
    '',
    '| variable | flag | default | accepted | meaning |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
    '## Tracing (OpenTelemetry)',
    '',
    'Traces are configured only by the standard OpenTelemetry variables, which the SDK reads itself (from',
    '`src/tracing/enabled.ts`; [Tracing](operations.md#tracing) says what the spans carry). These are the ones that',
    'matter here:',
    '',
    '| variable | meaning |',
    '| --- | --- |',
    ...OTEL_VARIABLES.map(({ name, meaning }) => `| \`${name}\` | ${cell(meaning)} |`),
    '',
  ].join('\n')
  return format(markdown, { ...(await resolveConfig(CONFIGURATION_DOC)), parser: 'markdown' })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIGURATION_DOC, await configurationDoc())
  process.stdout.write(`wrote ${CONFIGURATION_DOC}\n`)
}
