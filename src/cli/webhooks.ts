import { parseArgs } from 'node:util'
import { ConfigError, DEFAULT_DATABASE_URL, loadConfig } from '../config.js'
import { ATTEMPTS_KEPT, type Storage, type Subscription } from '../storage/index.js'
import { EVENT_TYPES, type EventType } from '../webhooks/events.js'
import { subscribe } from '../webhooks/subscribe.js'
import { urlProblem } from '../webhooks/url-policy.js'
import { accountName, endQuietlyWhenReaderGone, printNote, printTable, withStorage } from './common.js'
import { visible } from './visible.js'

const LIMIT_MAX = 1000
const DEFAULT_LIMIT = 20
// Characters of an attempt's error shown in the attempts table (the failed deliveries show theirs whole).
const ERROR_EXCERPT = 100

export const WEBHOOKS_HELP = `Usage:
  plantstore webhooks add --account NAME --url URL [--event plant.created] [--event plant.deleted]
                          [--database URL]
      Subscribes URL to the account's events (both types when no --event is given). Prints the signing
      secret alone on the first line of stdout (details go to stderr); it is shown only this once.
      Addresses that are not public (private, loopback, link-local, documentation, reserved) are refused
      unless PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true.
  plantstore webhooks list [--account NAME] [--database URL]
      Lists subscriptions (never their secrets): STATUS is active, disabled:failing (its attempts failed for the
      whole give-up period) or disabled:backlog (its queue reached its cap); QUEUED counts deliveries waiting;
      SINCE is when a disabled one was disabled, or since when an active one's attempts have failed (- when they
      succeed).
  plantstore webhooks remove SUBSCRIPTION_ID [--database URL]
      Removes a subscription with its undelivered events, failed deliveries and recorded attempts.
  plantstore webhooks enable SUBSCRIPTION_ID [--database URL]
      Enables a disabled subscription: the events made from now on are delivered (those made while it was
      disabled are not, and its failed deliveries stay failed); its failures and give-up clock start over.
      An active subscription is left as it is.
  plantstore webhooks deliveries SUBSCRIPTION_ID [--limit N] [--database URL]
      Shows a subscription's status, its recent attempts (the last ${ATTEMPTS_KEPT} are kept; ERROR is the first ${ERROR_EXCERPT}
      characters) and its failed deliveries (kept PLANTSTORE_WEBHOOK_FAILED_RETENTION_HOURS, 168 by default,
      after failing), newest first. --limit: at most N of each, 1 to ${LIMIT_MAX} (default ${DEFAULT_LIMIT}).

--database defaults to DATABASE_URL, then ${DEFAULT_DATABASE_URL}.`

async function add(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      url: { type: 'string' },
      event: { type: 'string', multiple: true },
      database: { type: 'string' },
    },
  })
  const account = accountName(values.account)
  // Every type when none is given (subscribe's default).
  const events = values.event as EventType[] | undefined
  const unknown = events?.find((event) => !EVENT_TYPES.includes(event as EventType))
  if (unknown !== undefined) {
    throw new ConfigError(`--event: unknown event type "${unknown}"; expected ${EVENT_TYPES.join(' or ')}`)
  }
  const allowPrivate = loadConfig(process.env).PLANTSTORE_WEBHOOK_ALLOW_PRIVATE
  // The operator's own tool: the detail (which address, or no such host), not what a tenant is told.
  if (values.url === undefined) throw new ConfigError('--url: is required')
  const problem = await urlProblem(values.url, allowPrivate)
  // A private address is the operator's to allow (a test, a private network); a host without one is not.
  const allow = problem?.detail.endsWith('not a public address')
    ? '; PLANTSTORE_WEBHOOK_ALLOW_PRIVATE=true allows it'
    : ''
  if (problem !== undefined) throw new ConfigError(`--url: ${problem.detail}${allow}`)
  await withStorage(values.database, async (storage) => {
    const { secret, subscription } = await subscribe(storage.webhooks, {
      accountName: account,
      url: values.url!,
      eventTypes: events,
    })
    process.stdout.write(secret + '\n')
    printNote(
      `Created ${subscription.id} for account ${account}: ${subscription.eventTypes.join(' ')} to ${subscription.url}.`,
    )
    printNote('The signing secret is shown only this once.')
  })
}

/** active, disabled:failing or disabled:backlog. */
function statusOf(subscription: Subscription): string {
  return subscription.state === 'active' ? 'active' : `disabled:${subscription.disabledReason ?? 'unknown'}`
}

/** When a disabled subscription was disabled, or since when an active one fails; undefined when it succeeds. */
function sinceOf(subscription: Subscription): Date | undefined {
  return (subscription.state === 'active' ? subscription.failingSince : subscription.disabledAt) ?? undefined
}

async function list(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { account: { type: 'string' }, database: { type: 'string' } } })
  await withStorage(values.database, async (storage) => {
    const rows = (await storage.webhooks.listSubscriptions({ accountName: values.account })).map((subscription) => [
      subscription.id,
      subscription.accountName,
      subscription.eventTypes.join(','),
      statusOf(subscription),
      String(subscription.queued),
      sinceOf(subscription)?.toISOString() ?? '-',
      subscription.createdAt.toISOString(),
      subscription.url,
    ])
    printTable(['ID', 'ACCOUNT', 'EVENTS', 'STATUS', 'QUEUED', 'SINCE', 'CREATED', 'URL'], rows)
  })
}

async function remove(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { database: { type: 'string' } }, allowPositionals: true })
  const id = subscriptionId(positionals)
  await withStorage(values.database, async (storage) => {
    if (!(await storage.webhooks.deleteSubscription(id)))
      throw new ConfigError(`SUBSCRIPTION_ID: no subscription with id ${id}`)
    printNote(`Removed ${id}.`)
  })
}

/** The one subscription id a command takes, or the usage error. */
function subscriptionId(positionals: string[]): string {
  const id = positionals[0]
  if (id === undefined || positionals.length > 1) {
    throw new ConfigError('SUBSCRIPTION_ID: give exactly one subscription id (see webhooks list)')
  }
  return id
}

/** The subscription with that id, or the usage error saying there is none. */
async function existing(storage: Storage, id: string): Promise<Subscription> {
  // Storage looks subscriptions up by account only; an operator's tool can afford reading them all.
  const subscription = (await storage.webhooks.listSubscriptions()).find((found) => found.id === id)
  if (subscription === undefined) throw new ConfigError(`SUBSCRIPTION_ID: no subscription with id ${id}`)
  return subscription
}

/** Its status and since when: `active`, `active, failing since T`, `disabled:failing since T`. */
function statusLine(subscription: Subscription): string {
  const since = sinceOf(subscription)?.toISOString()
  if (subscription.state === 'active') return since === undefined ? 'active' : `active, failing since ${since}`
  return `${statusOf(subscription)}${since === undefined ? '' : ` since ${since}`}`
}

/** The first `max` characters of `text` (whole code points), with an ellipsis when cut. */
function excerpt(text: string, max: number): string {
  const characters = [...text]
  return characters.length <= max ? text : characters.slice(0, max).join('') + '…'
}

async function enable(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { database: { type: 'string' } }, allowPositionals: true })
  const id = subscriptionId(positionals)
  await withStorage(values.database, async (storage) => {
    const before = await existing(storage, id)
    // Storage only ever enables a disabled one; read first to tell the operator which it was.
    if (before.state === 'active') return printNote(`${id} is already active; nothing changed.`)
    if ((await storage.webhooks.enableSubscription(id)) === undefined) {
      throw new ConfigError(`SUBSCRIPTION_ID: no subscription with id ${id}`)
    }
    printNote(`Enabled ${id} (it was ${statusLine(before)}): the events made from now on are delivered.`)
  })
}

/** --limit: a whole number from 1 to LIMIT_MAX, DEFAULT_LIMIT when not given. */
function parseLimit(value: string | undefined): number {
  if (value === undefined) return DEFAULT_LIMIT
  const limit = /^\d{1,4}$/.test(value) ? Number(value) : 0
  if (limit < 1 || limit > LIMIT_MAX) throw new ConfigError(`--limit: expected a whole number from 1 to ${LIMIT_MAX}`)
  return limit
}

async function deliveries(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { limit: { type: 'string' }, database: { type: 'string' } },
    allowPositionals: true,
  })
  const id = subscriptionId(positionals)
  const limit = parseLimit(values.limit)
  await withStorage(values.database, async (storage) => {
    const subscription = await existing(storage, id)
    // One more than shown, to tell whether there are more.
    const history = await storage.webhooks.deliveryHistory(id, limit + 1)
    endQuietlyWhenReaderGone()
    const out = (line: string) => process.stdout.write(visible(line) + '\n')
    out(
      `${subscription.id} (account ${subscription.accountName}): ${statusLine(subscription)}, ` +
        `${subscription.queued} queued, to ${subscription.url}`,
    )
    out('')
    const attempts = history.attempts.slice(0, limit)
    if (attempts.length === 0) out('Recent attempts: none.')
    else {
      out(`Recent attempts, newest first (the last ${ATTEMPTS_KEPT} are kept):`)
      printTable(
        ['STARTED', 'EVENT', 'TYPE', 'OUTCOME', 'STATUS', 'DURATION', 'ERROR'],
        attempts.map((attempt) => [
          attempt.startedAt.toISOString(),
          attempt.eventId,
          attempt.eventType,
          attempt.outcome,
          attempt.status === null ? '-' : String(attempt.status),
          `${attempt.durationMs}ms`,
          attempt.error === null ? '' : excerpt(attempt.error, ERROR_EXCERPT),
        ]),
      )
    }
    out('')
    const failed = history.failed.slice(0, limit)
    if (failed.length === 0) out('Failed deliveries: none.')
    else {
      out('Failed deliveries, newest first:')
      printTable(
        ['FAILED_AT', 'EVENT', 'TYPE', 'ATTEMPTS', 'LAST_STATUS', 'LAST_ERROR'],
        failed.map((delivery) => [
          delivery.failedAt.toISOString(),
          delivery.eventId,
          delivery.eventType,
          String(delivery.attempts),
          delivery.lastStatus === null ? '-' : String(delivery.lastStatus),
          delivery.lastError ?? '',
        ]),
      )
      if (history.failed.length > limit) out('More failed deliveries are kept: raise --limit to see them.')
    }
  })
}

/** `plantstore webhooks add|list|remove|enable|deliveries`. */
export async function webhooksCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args
  const commands: Record<string, (args: string[]) => Promise<void>> = { add, list, remove, enable, deliveries }
  const command = sub === undefined ? undefined : commands[sub]
  if (command === undefined) {
    throw new ConfigError(
      `webhooks: unknown subcommand "${sub ?? ''}"; expected add, list, remove, enable or deliveries`,
    )
  }
  await command(rest)
}
