import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { openStorage, type Storage } from '../../src/storage/index.js'
import type { Subscription } from '../../src/storage/types.js'
import { WebhookDispatcher, type DispatcherOptions } from '../../src/webhooks/dispatcher.js'
import { newSigningSecret, newSubscriptionId } from '../../src/webhooks/events.js'
import { backends, type TestDatabase } from '../helpers/backends.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { cleanup, eventually, runCli, tempDatabase, type CliResult } from '../helpers/server-process.js'

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

// What the receiver answers every attempt, with a 500: a body holding an ESC sequence (clear screen).
const HOSTILE_ANSWER = 'down\u001b[2J for maintenance'

/** The cells of a printTable line (no cell here holds two spaces in a row). */
const cells = (line: string) => line.split(/ {2,}/)

for (const backend of backends) {
  describe(`plantstore webhooks on failing and disabled subscriptions (${backend.name})`, () => {
    let database: TestDatabase
    let storage: Storage
    let receiver: Receiver
    // Disabled after its first attempt failed, its three deliveries failed with it.
    let disabled: Subscription
    // Still active, its one attempt failed and its delivery waiting for a retry.
    let failing: Subscription

    const FAST: DispatcherOptions = {
      timeoutMs: 2000,
      retryBaseMs: 50,
      giveUpAfterMs: 0,
      failedRetentionMs: 3_600_000,
      allowPrivate: true,
      pollMs: 20,
    }

    /** Runs a dispatcher until `done`, then stops it. */
    async function dispatchUntil(options: Partial<DispatcherOptions>, done: () => Promise<boolean>): Promise<void> {
      const dispatcher = new WebhookDispatcher(storage, { ...FAST, ...options })
      dispatcher.start()
      try {
        await eventually(done, 10_000, 20)
      } finally {
        await dispatcher.stop()
      }
    }

    const subscribe = (accountName: string) =>
      storage.createSubscription({
        id: newSubscriptionId(),
        accountName,
        url: receiver.url,
        secret: newSigningSecret(),
        eventTypes: ['plant.created', 'plant.deleted'],
      })
    const listed = async (id: string) => (await storage.listSubscriptions()).find((found) => found.id === id)!

    before(async () => {
      database = await backend.createDatabase()
      storage = await openStorage(database.url)
      receiver = await startReceiver()
      receiver.answer = () => ({ status: 500, body: HOSTILE_ANSWER })
      disabled = await subscribe('acme')
      for (let id = 1n; id <= 3n; id++) await storage.createPlant(disabled.accountId, { id, name: 'Fern', tag: null })
      // A give-up period of 0: the first failure disables it and fails every queued delivery.
      await dispatchUntil({ giveUpAfterMs: 0 }, async () => (await listed(disabled.id)).state === 'disabled')
      assert.equal(receiver.received.length, 1)
      disabled = await listed(disabled.id)
      failing = await subscribe('globex')
      await storage.createPlant(failing.accountId, { id: 1n, name: 'Ivy', tag: null })
      // Retried only after a minute: the delivery stays queued, the subscription failing.
      await dispatchUntil(
        { giveUpAfterMs: 3_600_000, retryBaseMs: 120_000 },
        async () => (await listed(failing.id)).failingSince !== null,
      )
      failing = await listed(failing.id)
    })
    after(async () => {
      await receiver?.close()
      await storage?.close()
      await database?.dispose()
    })

    test(`list shows each subscription's status, queue and since when it fails or is disabled on ${backend.name}`, async () => {
      const result = await runCli(['webhooks', 'list', '--database', database.url])
      assert.equal(result.code, 0, result.stderr)
      const [header, ...rows] = result.stdout.trimEnd().split('\n')
      assert.deepEqual(cells(header!), ['ID', 'ACCOUNT', 'EVENTS', 'STATUS', 'QUEUED', 'SINCE', 'CREATED', 'URL'])
      assert.equal(disabled.queued, 0)
      assert.equal(failing.queued, 1)
      const row = (subscription: Subscription, account: string, status: string, since: Date) => [
        subscription.id,
        account,
        'plant.created,plant.deleted',
        status,
        String(subscription.queued),
        since.toISOString(),
        subscription.createdAt.toISOString(),
        receiver.url,
      ]
      assert.deepEqual(rows.map(cells), [
        row(disabled, 'acme', 'disabled:failing', disabled.disabledAt!),
        row(failing, 'globex', 'active', failing.failingSince!),
      ])
    })
  })
}
