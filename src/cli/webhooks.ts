import { parseArgs } from 'node:util'
import { ConfigError, loadConfig } from '../config.js'
import type { Subscription } from '../storage/types.js'
import { EVENT_TYPES, type EventType } from '../webhooks/events.js'
import { subscribe } from '../webhooks/subscribe.js'
import { urlProblem } from '../webhooks/url-policy.js'
import { accountName, printNote, printTable, withStorage } from './common.js'

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
      Removes a subscription and its undelivered events.

--database defaults to DATABASE_URL, then sqlite:./data/plantstore.db.`

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
  const problem = values.url === undefined ? 'is required' : (await urlProblem(values.url, allowPrivate))?.detail
  if (problem !== undefined) throw new ConfigError(`--url: ${problem}`)
  await withStorage(values.database, async (storage) => {
    const { secret, subscription } = await subscribe(storage, {
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
    const rows = (await storage.listSubscriptions({ accountName: values.account })).map((subscription) => [
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
  const id = positionals[0]
  if (id === undefined || positionals.length > 1) {
    throw new ConfigError('SUBSCRIPTION_ID: give exactly one subscription id (see webhooks list)')
  }
  await withStorage(values.database, async (storage) => {
    if (!(await storage.deleteSubscription(id))) throw new ConfigError(`SUBSCRIPTION_ID: no subscription with id ${id}`)
    printNote(`Removed ${id}.`)
  })
}

/** `plantstore webhooks add|list|remove`. */
export async function webhooksCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args
  const commands: Record<string, (args: string[]) => Promise<void>> = { add, list, remove }
  const command = sub === undefined ? undefined : commands[sub]
  if (command === undefined) {
    throw new ConfigError(`webhooks: unknown subcommand "${sub ?? ''}"; expected add, list or remove`)
  }
  await command(rest)
}
