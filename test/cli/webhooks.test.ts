import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { openStorage, type InstrumentedStorage } from '../../src/storage/index.js'
import type { Subscription } from '../../src/storage/types.js'
import { WebhookDispatcher, type DispatcherOptions } from '../../src/webhooks/dispatcher.js'
import { deliverySettings, loadConfig } from '../../src/config.js'
import { newSigningSecret, newSubscriptionId, plantCreated } from '../../src/webhooks/events.js'
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
    [
      'https://203.0.113.10/hook',
      'plantstore: --url: host 203.0.113.10 is not a public address; PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it',
    ],
    [
      'https://[2001:db8::1]/hook',
      'plantstore: --url: host 2001:db8::1 is not a public address; PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it',
    ],
    [
      'https://localhost/hook',
      'plantstore: --url: host localhost resolves to 127.0.0.1, which is not a public address; PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it',
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

describe('plantstore webhooks, a stored URL with credentials', () => {
  test('list and deliveries show its user information as ***, never its password', async () => {
    // What a store written before every way in checked URLs may hold.
    const database = tempDatabase()
    const storage = await openStorage(database)
    const { id } = await storage.webhooks.createSubscription({
      id: newSubscriptionId(),
      accountName: 'acme',
      url: 'https://ops:hunter2@8.8.8.8/hooks/plants',
      secret: newSigningSecret(),
      eventTypes: ['plant.created'],
    })
    await storage.close()
    const [listed, shown] = await Promise.all([
      runCli(['webhooks', 'list', '--database', database]),
      runCli(['webhooks', 'deliveries', id, '--database', database]),
    ])
    for (const result of [listed, shown]) {
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /https:\/\/\*\*\*@8\.8\.8\.8\/hooks\/plants\n/)
      assert.doesNotMatch(result.stdout, /hunter2|ops/)
    }
  })
})

// What the receiver answers every attempt, with a 500: a body holding an ESC sequence (clear screen), kept as the
// attempt's error.
const HOSTILE_ANSWER = 'down\u001b[2J for maintenance'
const ESCAPED_ERROR = 'not 2xx: down\\x1b[2J for maintenance'
const GIVEN_UP = 'subscription disabled: its attempts failed for the whole give-up period'

/** Every character a terminal could act on, but the newline that ends each line. */
const RAW_CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}](?<!\n)/u

/** The sections of `webhooks deliveries` output (separated by a blank line), each as its lines. */
const sections = (stdout: string) =>
  stdout
    .replace(/\n$/, '')
    .split('\n\n')
    .map((section) => section.split('\n'))

/** The cells of a printTable line (no cell here holds two spaces in a row). */
const cells = (line: string) => line.split(/ {2,}/)

describe('plantstore webhooks help', { concurrency: true }, () => {
  const SUBCOMMANDS = ['add', 'list', 'remove', 'enable', 'deliveries']

  test('webhooks --help shows the usage of every subcommand, the new options included', async () => {
    const result = await runCli(['webhooks', '--help'])
    assert.equal(result.code, 0, result.stderr)
    const usages = [...result.stdout.matchAll(/^ {2}plantstore webhooks (\w+)/gm)].map((match) => match[1])
    assert.deepEqual(usages, SUBCOMMANDS)
    assert.match(result.stdout, /^ {2}plantstore webhooks enable SUBSCRIPTION_ID \[--database URL\]$/m)
    assert.match(
      result.stdout,
      /^ {2}plantstore webhooks deliveries SUBSCRIPTION_ID \[--limit N\] \[--database URL\]$/m,
    )
  })

  test('plantstore --help says webhooks also enables subscriptions and shows their deliveries', async () => {
    const result = await runCli(['--help'])
    assert.equal(result.code, 0, result.stderr)
    assert.match(
      result.stdout,
      /^ {2}webhooks +add, list, remove and enable webhook subscriptions, show their deliveries$/m,
    )
  })

  test('plantstore webhooks frobnicate names every subcommand', async () => {
    assertRefused(
      await runCli(['webhooks', 'frobnicate']),
      `plantstore: webhooks: unknown subcommand "frobnicate"; expected ${SUBCOMMANDS.slice(0, -1).join(', ')} or deliveries`,
    )
  })
})

for (const backend of backends) {
  describe(`plantstore webhooks on failing and disabled subscriptions (${backend.name})`, () => {
    let database: TestDatabase
    let storage: InstrumentedStorage
    let receiver: Receiver
    // Disabled after its first attempt failed, its three deliveries failed with it.
    let disabled: Subscription
    // Still active, its one attempt failed and its delivery waiting for a retry.
    let failing: Subscription
    // The one event attempted on `disabled`: its first.
    let firstEventId: string

    const FAST: DispatcherOptions = {
      ...deliverySettings(loadConfig({})),
      timeoutMs: 2000,
      retryBaseMs: 50,
      giveUpAfterMs: 0,
      failedRetentionMs: 3_600_000,
      allowPrivate: true,
      pollMs: 20,
    }

    /** Runs a dispatcher until `done`, then stops it. */
    async function dispatchUntil(options: Partial<DispatcherOptions>, done: () => Promise<boolean>): Promise<void> {
      const dispatcher = new WebhookDispatcher(storage.webhooks, { ...FAST, ...options })
      dispatcher.start()
      try {
        await eventually(done, 10_000, 20)
      } finally {
        await dispatcher.stop()
      }
    }

    const subscribe = (accountName: string) =>
      storage.webhooks.createSubscription({
        id: newSubscriptionId(),
        accountName,
        url: receiver.url,
        secret: newSigningSecret(),
        eventTypes: ['plant.created', 'plant.deleted'],
      })
    const listed = async (id: string) => (await storage.webhooks.listSubscriptions()).find((found) => found.id === id)!

    before(async () => {
      database = await backend.createDatabase()
      storage = await openStorage(database.url)
      receiver = await startReceiver()
      receiver.answer = () => ({ status: 500, body: HOSTILE_ANSWER })
      disabled = await subscribe('acme')
      for (let id = 1n; id <= 3n; id++)
        await storage.plants.create(disabled.accountId, { id, name: 'Fern', tag: null }, plantCreated)
      // A give-up period of 0: the first failure disables it and fails every queued delivery.
      await dispatchUntil({ giveUpAfterMs: 0 }, async () => (await listed(disabled.id)).state === 'disabled')
      assert.equal(receiver.received.length, 1)
      firstEventId = String(receiver.received[0]!.headers['webhook-id'])
      disabled = await listed(disabled.id)
      failing = await subscribe('globex')
      await storage.plants.create(failing.accountId, { id: 1n, name: 'Ivy', tag: null }, plantCreated)
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

    const deliveries = (...args: string[]) => runCli(['webhooks', 'deliveries', ...args, '--database', database.url])

    test(`deliveries shows a disabled subscription's status, its attempt and its failed deliveries, newest first, escaped, on ${backend.name}`, async () => {
      const result = await deliveries(disabled.id)
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stderr, '')
      assert.doesNotMatch(result.stdout, RAW_CONTROL, JSON.stringify(result.stdout))
      const history = await storage.webhooks.deliveryHistory(disabled.id, 10)
      const [status, attempts, failed, ...rest] = sections(result.stdout)
      assert.deepEqual(rest, [])
      assert.deepEqual(status, [
        `${disabled.id} (account acme): disabled:failing since ${disabled.disabledAt!.toISOString()}, 0 queued, to ${receiver.url}`,
      ])
      assert.equal(attempts![0], 'Recent attempts, newest first (the last 20 are kept):')
      assert.deepEqual(cells(attempts![1]!), ['STARTED', 'EVENT', 'TYPE', 'OUTCOME', 'STATUS', 'DURATION', 'ERROR'])
      assert.equal(attempts!.length, 3, attempts!.join('\n'))
      const [started, event, type, outcome, code, duration, error] = cells(attempts![2]!)
      assert.deepEqual(
        [started, event, type, outcome, code, error],
        [history.attempts[0]!.startedAt.toISOString(), firstEventId, 'plant.created', 'failed', '500', ESCAPED_ERROR],
      )
      assert.match(duration!, /^\d+ms$/)
      assert.equal(failed![0], 'Failed deliveries, newest first:')
      assert.deepEqual(cells(failed![1]!), ['FAILED_AT', 'EVENT', 'TYPE', 'ATTEMPTS', 'LAST_STATUS', 'LAST_ERROR'])
      // Newest first: the first event, the one attempted, comes last.
      assert.equal(history.failed.length, 3)
      assert.equal(history.failed[2]!.eventId, firstEventId)
      assert.deepEqual(
        failed!.slice(2).map(cells),
        history.failed.map((delivery, i) => [
          delivery.failedAt.toISOString(),
          delivery.eventId,
          'plant.created',
          ...(i === 2 ? ['1', '500', ESCAPED_ERROR] : ['0', '-', GIVEN_UP]),
        ]),
      )
    })

    test(`deliveries --limit 1 shows the newest attempt and failed delivery, saying more failed on ${backend.name}`, async () => {
      const result = await deliveries(disabled.id, '--limit', '1')
      assert.equal(result.code, 0, result.stderr)
      const [, attempts, failed] = sections(result.stdout)
      assert.equal(attempts!.length, 3)
      const newest = (await storage.webhooks.deliveryHistory(disabled.id, 1)).failed[0]!
      assert.deepEqual(failed!.slice(2).map(cells), [
        [newest.failedAt.toISOString(), newest.eventId, 'plant.created', '0', '-', GIVEN_UP],
        ['More failed deliveries are kept: raise --limit to see them.'],
      ])
    })

    test(`deliveries shows an active subscription's failing since, its retried attempt and no failed delivery on ${backend.name}`, async () => {
      const result = await deliveries(failing.id)
      assert.equal(result.code, 0, result.stderr)
      const [status, attempts, failed] = sections(result.stdout)
      assert.deepEqual(status, [
        `${failing.id} (account globex): active, failing since ${failing.failingSince!.toISOString()}, 1 queued, to ${receiver.url}`,
      ])
      assert.equal(attempts!.length, 3, attempts!.join('\n'))
      assert.deepEqual(cells(attempts![2]!).slice(2, 5), ['plant.created', 'retry', '500'])
      assert.deepEqual(failed, ['Failed deliveries: none.'])
    })

    test(`deliveries of an unknown subscription id exits 1 on ${backend.name}`, async () => {
      assertRefused(
        await deliveries('whk_0000000000000000'),
        'plantstore: SUBSCRIPTION_ID: no subscription with id whk_0000000000000000',
      )
    })

    test(`deliveries refuses a --limit that is not a whole number from 1 to 1000 on ${backend.name}`, async () => {
      for (const limit of ['0', '1001', '2.5', 'ten']) {
        assertRefused(
          await deliveries(disabled.id, '--limit', limit),
          'plantstore: --limit: expected a whole number from 1 to 1000',
        )
      }
    })

    // Last: these change the subscriptions the tests above read.
    const enable = (id: string) => runCli(['webhooks', 'enable', id, '--database', database.url])

    test(`enable of an unknown subscription id exits 1 on ${backend.name}`, async () => {
      assertRefused(
        await enable('whk_0000000000000000'),
        'plantstore: SUBSCRIPTION_ID: no subscription with id whk_0000000000000000',
      )
    })

    test(`enable re-activates a disabled subscription, saying what it was, then notes it is already active on ${backend.name}`, async () => {
      const result = await enable(disabled.id)
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stdout, '')
      assert.equal(
        result.stderr,
        `Enabled ${disabled.id} (it was disabled:failing since ${disabled.disabledAt!.toISOString()}): ` +
          'the events made from now on are delivered.\n',
      )
      const enabled = await listed(disabled.id)
      assert.deepEqual(
        [enabled.state, enabled.disabledReason, enabled.disabledAt, enabled.failingSince],
        ['active', null, null, null],
      )
      const again = await enable(disabled.id)
      assert.equal(again.code, 0, again.stderr)
      assert.equal(again.stderr, `${disabled.id} is already active; nothing changed.\n`)
    })

    test(`enable leaves an active subscription that is failing as it was on ${backend.name}`, async () => {
      const result = await enable(failing.id)
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stderr, `${failing.id} is already active; nothing changed.\n`)
      assert.deepEqual(await listed(failing.id), failing)
    })
  })
}
