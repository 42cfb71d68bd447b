import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { issueToken } from '../../src/auth/issue-token.js'
import { openStorage } from '../../src/storage/index.js'
import { newSigningSecret, newSubscriptionId } from '../../src/webhooks/events.js'
import { backends, type TestDatabase } from '../helpers/backends.js'
import { cleanup, runCli, tempDatabase } from '../helpers/server-process.js'

after(cleanup)

// Text a terminal would act on or that would forge a line: ESC sequences (clear screen, set the window title), BEL,
// CR LF and a fake row, C1 NEL and CSI, LINE SEPARATOR, a right-to-left override, and a backslash that must not
// pass for an escape. Stored directly, as rows written before URLs were checked (or by another tool) would be.
const HOSTILE_URL =
  'https://8.8.8.8/\u001b[2J\u001b]0;pwned\u0007\r\nwhk_0000000000000000  forged\u0085\u009b31m\u2028\u202ehi\\x1b'
const ESCAPED_URL =
  'https://8.8.8.8/\\x1b[2J\\x1b]0;pwned\\x07\\r\\nwhk_0000000000000000  forged\\x85\\x9b31m\\u2028\\u202ehi\\\\x1b'
const HOSTILE_ACCOUNT = 'evil\u001b[31m'
const HOSTILE_LABEL = 'ci\u001b[8m\nforged'

/** Every character a terminal could act on, but the newline that ends each line. */
const RAW_CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}](?<!\n)/u

/** Asserts `output` holds `rows` lines after the header, and no raw control character. */
function assertPrintable(output: string, rows: number): string[] {
  assert.doesNotMatch(output, RAW_CONTROL, JSON.stringify(output))
  const lines = output.trimEnd().split('\n')
  assert.equal(lines.length, 1 + rows, output)
  return lines.slice(1)
}

for (const backend of backends) {
  describe(`plantstore list commands print stored control characters escaped (${backend.name})`, () => {
    let database: TestDatabase
    let subscriptionId: string
    let tokenId: string
    before(async () => {
      database = await backend.createDatabase()
      const storage = await openStorage(database.url)
      try {
        subscriptionId = newSubscriptionId()
        await storage.webhooks.createSubscription({
          id: subscriptionId,
          accountName: HOSTILE_ACCOUNT,
          url: HOSTILE_URL,
          secret: newSigningSecret(),
          eventTypes: ['plant.created'],
        })
        tokenId = (await issueToken(storage, { accountName: HOSTILE_ACCOUNT, label: HOSTILE_LABEL })).token.id
      } finally {
        await storage.close()
      }
    })
    after(() => database.dispose())

    test(`webhooks list prints an old row's ESC, CR LF, C1, U+2028 and bidi characters escaped on ${backend.name}`, async () => {
      const result = await runCli(['webhooks', 'list', '--database', database.url])
      assert.equal(result.code, 0, result.stderr)
      const [row] = assertPrintable(result.stdout, 1)
      const [created] = row!.match(/\d{4}-\d\d-\d\dT\S+Z/)!
      assert.equal(
        row!.replace(/ {2,}/g, '  '),
        `${subscriptionId}  evil\\x1b[31m  plant.created  active  0  -  ${created}  ${ESCAPED_URL}`,
      )
    })

    test(`webhooks deliveries prints an old row's account and URL escaped on its status line on ${backend.name}`, async () => {
      const result = await runCli(['webhooks', 'deliveries', subscriptionId, '--database', database.url])
      assert.equal(result.code, 0, result.stderr)
      assert.doesNotMatch(result.stdout, RAW_CONTROL, JSON.stringify(result.stdout))
      assert.equal(
        result.stdout,
        `${subscriptionId} (account evil\\x1b[31m): active, 0 queued, to ${ESCAPED_URL}\n\n` +
          'Recent attempts: none.\n\nFailed deliveries: none.\n',
      )
    })

    test(`tokens list prints a stored label and account name escaped on ${backend.name}`, async () => {
      const result = await runCli(['tokens', 'list', '--database', database.url])
      assert.equal(result.code, 0, result.stderr)
      const [row] = assertPrintable(result.stdout, 1)
      assert.match(row!, new RegExp(`^${tokenId}  evil\\\\x1b\\[31m  plants:read,plants:write  active  \\S+  -\\s+`))
      assert.ok(row!.endsWith('  ci\\x1b[8m\\nforged'), row)
    })
  })
}

describe('plantstore error lines print control characters from the command line escaped', { concurrency: true }, () => {
  const database = tempDatabase()
  for (const [command, name] of [
    ['webhooks remove', 'SUBSCRIPTION_ID: no subscription with id'],
    ['webhooks enable', 'SUBSCRIPTION_ID: no subscription with id'],
    ['webhooks deliveries', 'SUBSCRIPTION_ID: no subscription with id'],
    ['tokens revoke', 'TOKEN_ID: no active token with id'],
  ] as const) {
    test(`${command} of an unknown id holding ESC and CR LF says so on one escaped line`, async () => {
      const result = await runCli([...command.split(' '), 'x\u001b[2J\r\nforged', '--database', database])
      assert.equal(result.code, 1, result.stderr)
      assert.equal(result.stderr, `plantstore: ${name} x\\x1b[2J\\r\\nforged\n`)
    })
  }
})
