import { buildApp } from './app.js'
import { bootstrapToken, BOOTSTRAP_ACCOUNT } from './auth/bootstrap.js'
import { ConfigError, type Config } from './config.js'
import { redactUrl } from './redact.js'
import { openStorage } from './storage/index.js'
import type { Storage } from './storage/types.js'

/** Opens the configured storage, or fails with one line naming DATABASE_URL. */
export function openConfiguredStorage(config: Pick<Config, 'DATABASE_URL'>): Storage {
  try {
    return openStorage(config.DATABASE_URL)
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err)
    if (reason.startsWith('DATABASE_URL:')) throw new ConfigError(reason)
    throw new ConfigError(`DATABASE_URL: cannot open ${redactUrl(config.DATABASE_URL)}: ${reason}`)
  }
}

function bootstrapBanner(secret: string, url: string): string {
  return [
    '',
    `plantstore: this store had no API tokens, so one was created for account "${BOOTSTRAP_ACCOUNT}"`,
    'with scopes plants:read and plants:write. It is shown only this once; keep it somewhere safe:',
    '',
    `    ${secret}`,
    '',
    `Try it:  curl -H "Authorization: Bearer ${secret}" ${url}/plants`,
    '',
  ].join('\n')
}

function listenError(err: unknown, config: Config): Error {
  const code = (err as { code?: unknown }).code
  if (code === 'EADDRINUSE') return new ConfigError(`PORT: ${config.PORT} is already in use on ${config.HOST}`)
  if (code === 'EACCES') return new ConfigError(`PORT: not allowed to listen on port ${config.PORT}`)
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return new ConfigError(`HOST: cannot listen on ${config.HOST}`)
  return err instanceof Error ? err : new Error(String(err))
}

/** Starts the service: storage, first token, app, listen; SIGTERM/SIGINT close it cleanly. */
export async function serve(config: Config): Promise<void> {
  const storage = openConfiguredStorage(config)
  const app = await buildApp({
    storage,
    logger: { level: config.LOG_LEVEL },
  })
  let address: string
  try {
    address = await app.listen({ port: config.PORT, host: config.HOST })
  } catch (err) {
    await storage.close()
    throw listenError(err, config)
  }
  // Only once listening: a first start that fails must not use up the token it would have shown.
  const generated = await bootstrapToken(storage, config.PLANTSTORE_BOOTSTRAP_TOKEN)
  if (generated !== undefined) process.stdout.write(bootstrapBanner(generated, address) + '\n')
  const shutdown = async (signal: string): Promise<void> => {
    app.log.info({ signal }, 'shutting down')
    await app.close()
    await storage.close()
    process.exit(0)
  }
  process.once('SIGTERM', (signal) => void shutdown(signal))
  process.once('SIGINT', (signal) => void shutdown(signal))
}
