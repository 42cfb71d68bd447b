import { parseArgs } from 'node:util'
import { issueToken } from '../auth/issue-token.js'
import { DEFAULT_SCOPES, parseDuration, SCOPES, type Scope } from '../auth/tokens.js'
import { ConfigError, DEFAULT_DATABASE_URL } from '../config.js'
import { accountName, printNote, printTable, withStorage } from './common.js'
import type { TokenRecord } from '../storage/index.js'

export const TOKENS_HELP = `Usage:
  plantstore tokens create --account NAME [--scope SCOPE]... [--expires-in 30d] [--label TEXT] [--database URL]
      Prints the new token alone on the first line of stdout (details go to stderr).
      SCOPE: ${SCOPES.join(', ')}; plants:read and plants:write when no --scope
      is given. Durations: 90s, 15m, 12h, 30d.
  plantstore tokens list [--account NAME] [--database URL]
      Lists tokens (never their secrets); MADE BY names the token that made one
      with POST /tokens.
  plantstore tokens revoke TOKEN_ID [--database URL]
      Revokes a token and every token it made, transitively; running servers
      refuse them within 2 seconds.

--database defaults to DATABASE_URL, then ${DEFAULT_DATABASE_URL}.`

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
  const account = accountName(values.account)
  const scopes = values.scope ?? [...DEFAULT_SCOPES]
  const unknown = scopes.find((scope) => !SCOPES.includes(scope as Scope))
  if (unknown !== undefined)
    throw new ConfigError(`--scope: unknown scope "${unknown}"; expected one of ${SCOPES.join(', ')}`)
  const ttl = values['expires-in'] === undefined ? undefined : parseDuration(values['expires-in'])
  if (values['expires-in'] !== undefined && ttl === undefined) {
    throw new ConfigError('--expires-in: expected a duration like 90s, 15m, 12h or 30d')
  }
  await withStorage(values.database, async (storage) => {
    const { secret, token } = await issueToken(storage, {
      accountName: account,
      scopes,
      label: values.label,
      expiresAt: ttl === undefined ? null : new Date(Date.now() + ttl),
    })
    process.stdout.write(secret + '\n')
    const expiry = token.expiresAt === null ? 'never expires' : `expires ${token.expiresAt.toISOString()}`
    printNote(`Created ${token.id} for account ${token.accountName}, scopes ${token.scopes.join(' ')}, ${expiry}.`)
    printNote('The token is shown only this once.')
  })
}

async function list(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { account: { type: 'string' }, database: { type: 'string' } } })
  await withStorage(values.database, async (storage) => {
    const now = Date.now()
    const rows = (await storage.tokens.list(values.account)).map((token) => [
      token.id,
      token.accountName,
      token.scopes.join(','),
      tokenStatus(token, now),
      token.createdAt.toISOString(),
      token.expiresAt?.toISOString() ?? '-',
      token.createdBy ?? '-',
      token.label ?? '',
    ])
    const header = ['ID', 'ACCOUNT', 'SCOPES', 'STATUS', 'CREATED', 'EXPIRES', 'MADE BY', 'LABEL']
    printTable(header, rows)
  })
}

async function revoke(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { database: { type: 'string' } }, allowPositionals: true })
  const id = positionals[0]
  if (id === undefined || positionals.length > 1)
    throw new ConfigError('TOKEN_ID: give exactly one token id (see tokens list)')
  await withStorage(values.database, async (storage) => {
    if (!(await storage.tokens.revoke(id))) throw new ConfigError(`TOKEN_ID: no active token with id ${id}`)
    printNote(`Revoked ${id}.`)
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
