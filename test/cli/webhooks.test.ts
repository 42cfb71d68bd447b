import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { cleanup, runCli, tempDatabase, type CliResult } from '../helpers/server-process.js'

after(cleanup)

const PUBLIC_URL = 'https://8.8.8.8/hooks/plants'

/** Exit status 1, nothing on stdout, and exactly `line` on stderr. */
function assertRefused(result: CliResult, line: string): void {
  assert.equal(result.code, 1, `exit code; stderr: ${result.stderr}`)
  assert.equal(result.stdout, '')
  assert.equal(result.stderr, `${line}\n`)
}

describe('plantstore webhooks add, URLs with control characters', { concurrency: true }, () => {
  const database = tempDatabase()
  const add = (url: string) =>
    runCli(['webhooks', 'add', '--account', 'acme', '--url', url, '--database', database], {
      PLANTSTORE_WEBHOOK_ALLOW_PRIVATE: 'true',
    })

  // A command line cannot carry NUL, and a lone surrogate reaches it as U+FFFD: the shared check refuses those
  // too (test/webhooks/url-policy.test.ts).
  for (const [what, url] of [
    ['an ESC character', `${PUBLIC_URL}/\u001b[2J`],
    ['a CR LF pair', `${PUBLIC_URL}\r\nwhk_0000000000000000  forged`],
    ['a DEL character', `${PUBLIC_URL}/\u007f`],
    ['a C1 control character (CSI)', `${PUBLIC_URL}/\u009b31m`],
  ] as const) {
    test(`refuses a URL with ${what}, with the rule the HTTP API applies, storing nothing`, async () => {
      assertRefused(
        await add(url),
        'plantstore: --url: expected text without control characters (U+0000 to U+001F, U+007F to U+009F) or unpaired surrogates',
      )
      const listed = await runCli(['webhooks', 'list', '--database', database])
      assert.equal(listed.code, 0, listed.stderr)
      assert.doesNotMatch(listed.stdout, /whk_/)
    })
  }
})

describe('plantstore webhooks add, hosts that are not public', { concurrency: true }, () => {
  const database = tempDatabase()
  const add = (url: string) => runCli(['webhooks', 'add', '--account', 'acme', '--url', url, '--database', database])

  // The operator's own tool: unlike a tenant over HTTP, it is told which address and why.
  for (const [url, line] of [
    ['https://203.0.113.10/hook', 'plantstore: --url: host 203.0.113.10 is not a public address'],
    ['https://[2001:db8::1]/hook', 'plantstore: --url: host 2001:db8::1 is not a public address'],
    [
      'https://localhost/hook',
      'plantstore: --url: host localhost resolves to 127.0.0.1, which is not a public address',
    ],
  ] as const) {
    test(`refuses ${url} without PLANTSTORE_WEBHOOK_ALLOW_PRIVATE, saying why`, async () => {
      assertRefused(await add(url), line)
    })
  }

  test('refuses a host that does not resolve, saying so', async () => {
    const result = await add('https://nothing.invalid/hook')
    assert.equal(result.code, 1, result.stderr)
    assert.match(result.stderr, /^plantstore: --url: host nothing\.invalid does not resolve \(\w+\)\n$/)
  })
})

describe('plantstore webhooks add, what it prints', () => {
  test('prints a bidi override in a URL escaped, on the Created line and in the list', async () => {
    const database = tempDatabase()
    // Allowed in a URL (no control character), yet it would reverse the rest of the line on a terminal.
    const url = `${PUBLIC_URL}/\u202egnp.exe`
    const added = await runCli(['webhooks', 'add', '--account', 'acme', '--url', url, '--database', database])
    assert.equal(added.code, 0, added.stderr)
    assert.match(
      added.stderr,
      /^Created whk_[0-9a-f]{16} for account acme: plant\.created plant\.deleted to https:\/\/8\.8\.8\.8\/hooks\/plants\/\\u202egnp\.exe\.\n/,
    )
    const listed = await runCli(['webhooks', 'list', '--database', database])
    assert.match(listed.stdout, /\/hooks\/plants\/\\u202egnp\.exe\n$/)
  })
})
