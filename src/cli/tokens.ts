import { parseArgs } from 'node:util'
import { issueToken } from '../auth/issue-token.js'
import { parseDuration, SCOPES, type Scope } from '../auth/tokens.js'
import { ConfigError, loadConfig } from '../config.js'
import { openConfiguredStorage } from '../server.js'
import type { Storage } from '../storage/index.js'
import type { TokenRecord } from '../storage/types.js'

export const TOKENS_HELP = `Usage:
  plantstore tokens create --account NAME [--scope plants:read] [--scope plants:write]
                           [--expires-in 30d] [--label TEXT] [--database URL]
      Prints the new token alone on the first line of stdout (details go to stderr).
      Both scopes when no --scope is given. Durations: 90s, 15m, 12h, 30d.
  plantstore tokens list [--account NAME] [--database URL]
      Lists tokens (never their secrets).
  plantstore tokens revoke TOKEN_ID [--database URL]
      Revokes a token; running servers refuse it within 2 seconds.

--database defaults to DATABASE_URL, then sqlite:./data/plantstore.db.`

const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

async function withStorage(database: string | undefined, fn: (storage: Storage) => Promise<void>): Promise<void> {
  const storage = await openConfiguredStorage(loadConfig(process.env, { DATABASE_URL: database }))
  await fn(storage).finally(() => storage.close())
}

function tokenStatus(token: TokenRecord, now: number): string {
  if (token.revokedAt !== null) return 'revoked'
  if (token.expiresAt !== null && token.expiresAt.getTime() <= now) return 'expired'
  return 'active'
}

async function create(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      scope: { type: 'string', multiple: true },
      'expires-in': { type: 'string' },
      label: { type: 'string' },
      database: { type: 'string' },
    },
  })
  if (values.account === undefined || !ACCOUNT_NAME.test(values.account)) {
    throw new ConfigError(
      '--account: required, 1 to 64 characters from A-Z a-z 0-9 . _ - (starting with a letter or digit)',
    )
  }
  const scopes = values.scope ?? [...SCOPES]
  const unknown = scopes.find((scope) => !SCOPES.includes(scope as Scope))
  if (unknown !== undefined)
    throw new ConfigError(`--scope: unknown scope "${unknown}"; expected ${SCOPES.join(' or ')}`)
  const ttl = values['expires-in'] === undefined ? undefined : parseDuration(values['expires-in'])
  if (values['expires-in'] !== undefined && ttl === undefined) {
    throw new ConfigError('--expires-in: expected a duration like 90s, 15m, 12h or 30d')
  }
  await withStorage(values.database, async (storage) => {
    const { secret, token } = await issueToken(storage, {
      accountName: values.account!,
      scopes,
      label: values.label,
      expiresAt: ttl === undefined ? null : new Date(Date.now() + ttl),
    })
    process.stdout.write(secret + '\n')
    const expiry = token.expiresAt === null ? 'never expires' : `expires ${token.expiresAt.toISOString()}`
    process.stderr.write(
      `Created ${token.id} for account ${token.accountName}, scopes ${token.scopes.join(' ')}, ${expiry}.\n`,
    )
    process.stderr.write('The token is shown only this once.\n')
  })
}

async function list(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { account: { type: 'string' }, database: { type: 'string' } } })
  await withStorage(values.database, async (storage) => {
    const now = Date.now()
    const rows = (await storage.listTokens(values.account)).map((token) => [
      token.id,
      token.accountName,
      token.scopes.join(','),
      tokenStatus(token, now),
      token.createdAt.toISOString(),
      token.expiresAt?.toISOString() ?? '-',
      token.label ?? '',
    ])
    const header = ['ID', 'ACCOUNT', 'SCOPES', 'STATUS', 'CREATED', 'EXPIRES', 'LABEL']
    const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)))
    for (const row of [header, ...rows]) {
      process.stdout.write(
        row
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join('  ')
          .trimEnd() + '\n',
      )
    }
  })
}

async function revoke(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { database: { type: 'string' } }, allowPositionals: true })
  const id = positionals[0]
  if (id === undefined || positionals.length > 1)
    throw new ConfigError('TOKEN_ID: give exactly one token id (see tokens list)')
  await withStorage(values.database, async (storage) => {
    if (!(await storage.revokeToken(id))) throw new ConfigError(`TOKEN_ID: no active token with id ${id}`)
    process.stderr.write(`Revoked ${id}.\n`)
  })
}

/** `plantstore tokens create|list|revoke`. */
export async function tokensCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args
  const commands: Record<string, (args: string[]) => Promise<void>> = { create, list, revoke }
  const command = sub === undefined ? undefined : commands[sub]
  if (command === undefined)
    throw new ConfigError(`tokens: unknown subcommand "${sub ?? ''}"; expected create, list or revoke`)
  await command(rest)
}
