import { ConfigError } from '../config.js'
import { VERSION } from '../version.js'
import { BACKUP_HELP, backupCommand } from './backup.js'
import { EXPORT_HELP, exportCommand } from './export.js'
import { IMPORT_HELP, importCommand } from './import.js'
import { MIGRATE_HELP, migrateCommand } from './migrate.js'
import { SERVE_HELP } from './serve-help.js'
import { TOKENS_HELP, tokensCommand } from './tokens.js'
import { visible } from './visible.js'
import { WEBHOOKS_HELP, webhooksCommand } from './webhooks.js'

const HELP = `plantstore ${VERSION}: the Plant Store API service

Usage: plantstore <command> [options]

Commands:
  serve     run the HTTP service (what npm start runs)
  tokens    create, list and revoke API tokens
  webhooks  add, list, remove and enable webhook subscriptions, show their deliveries
  migrate   apply database migrations and exit
  backup    copy a SQLite store to a file while it serves
  export    write the store (or one account) as NDJSON, to move or keep it
  import    read an export into an empty store, on either backend

Run plantstore <command> --help for a command's options.`

interface Command {
  help: string
  run: (args: string[]) => Promise<void>
  /** Does nothing without a subcommand: its help is the answer then. */
  subcommands?: true
}

const COMMANDS: Record<string, Command> = {
  // Loaded only when run: the other commands never load the HTTP server and its dependencies.
  serve: { help: SERVE_HELP, run: async (args) => (await import('./serve.js')).serveCommand(args) },
  tokens: { help: TOKENS_HELP, run: tokensCommand, subcommands: true },
  webhooks: { help: WEBHOOKS_HELP, run: webhooksCommand, subcommands: true },
  migrate: { help: MIGRATE_HELP, run: migrateCommand },
  backup: { help: BACKUP_HELP, run: backupCommand },
  export: { help: EXPORT_HELP, run: exportCommand },
  import: { help: IMPORT_HELP, run: importCommand },
}

async function main(argv: string[]): Promise<void> {
  const [name, ...args] = argv
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(HELP + '\n')
    return
  }
  if (name === '--version') return void process.stdout.write(VERSION + '\n')
  const command = COMMANDS[name]
  if (command === undefined) throw new ConfigError(`unknown command "${name}"; run plantstore --help`)
  const help = args.includes('--help') || args.includes('-h') || (command.subcommands && args.length === 0)
  if (help) return void process.stdout.write(command.help + '\n')
  // Every command reads its settings through commandConfig (settings.ts), which warns of misspelt ones.
  await command.run(args)
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // Configuration and usage problems get one clear line; anything else is a bug worth its stack. Either may quote
  // a command-line argument or stored text, so each line is escaped (a message's own LF included).
  const known = err instanceof ConfigError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
  const lines = known ? [(err as Error).message] : String((err as Error).stack ?? err).split('\n')
  process.stderr.write(`plantstore: ${lines.map(visible).join('\n')}\n`)
  process.exitCode = 1
  // A cluster worker's IPC channel would keep it alive; let it go so the process can exit.
  if (process.connected) process.disconnect()
})
