import { createLocalJWKSet, errors, type JWTVerifyGetKey } from 'jose'
import { redactUrl } from '../redact.js'
import { keyUrlAllowed } from './jwt-shapes.js'

/** Where the keys come from, and how often they may be asked for. */
export interface KeySetOptions {
  /** The issuer: without `jwksUrl`, its `/.well-known/openid-configuration` names the key set. */
  issuer: string
  jwksUrl?: string
  /** After any fetch, successful or not, how long before another (an unknown `kid` may ask). 30 s by default. */
  cooldownMs?: number
  /** Keys older than this are fetched again in the background, still used meanwhile. 10 min by default. */
  maxAgeMs?: number
  /** How long one fetch may take. 5 s by default. */
  timeoutMs?: number
  /** Told when a fetch fails after the last one succeeded (once per outage), and when one succeeds again. */
  onOutage?: (err: unknown) => void
  onRecovery?: () => void
  /**
   * The clock of the cooldown and the keys' age, in ms: the monotonic one when not given, which a step of the
   * system clock cannot move (back an hour, it would hold every fetch for an hour); a test moves its own.
   */
  now?: () => number
}

// A key set or discovery document is a few KiB; a provider answering far more is broken.
const MAX_DOCUMENT_BYTES = 1024 * 1024

/** The body of `response` as text, refusing (and cancelling) one over MAX_DOCUMENT_BYTES before reading it all. */
async function boundedText(response: Response): Promise<string> {
  if (Number(response.headers.get('content-length') ?? 0) > MAX_DOCUMENT_BYTES) {
    await response.body?.cancel()
    throw new Error(`answered over ${MAX_DOCUMENT_BYTES} bytes`)
  }
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength
    if (size > MAX_DOCUMENT_BYTES) throw new Error(`answered over ${MAX_DOCUMENT_BYTES} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

// The URL as logged: without credentials or query, which may carry secrets.
const shown = (url: string) => redactUrl(url.split('?')[0]!)

async function fetchJson(url: string, timeoutMs: number): Promise<unknown> {
  if (!keyUrlAllowed(url))
    throw new Error(`refusing to fetch keys from ${shown(url)}: not https, nor a loopback address`)
  // The timeout covers the body too: the signal aborts the read of a body that trickles in.
  const response = await fetch(url, {
    headers: { accept: 'application/json, application/jwk-set+json' },
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
  })
  if (response.status !== 200) {
    await response.body?.cancel()
    throw new Error(`${shown(url)} answered ${response.status}`)
  }
  try {
    return JSON.parse(await boundedText(response)) as unknown
  } catch (err) {
    throw new Error(`${shown(url)}: ${(err as Error).message}`)
  }
}

/**
 * The issuer's signing keys, as jose's `jwtVerify` asks for them. Unlike jose's remote key set, an outage costs
 * nothing to tokens signed by keys already at hand: keys past their age are kept while the fetch that would replace
 * them fails, and every fetch, failed or not, starts the cooldown, so a flood of tokens with made-up `kid`s asks
 * the provider at most once per cooldown, up or down.
 */
export class KeySet {
  readonly #options: Required<Omit<KeySetOptions, 'jwksUrl' | 'onOutage' | 'onRecovery'>> & KeySetOptions
  #jwksUrl: string | undefined
  #local: ReturnType<typeof createLocalJWKSet> | undefined
  #fetchedAt = -Infinity
  #triedAt = -Infinity
  #pending: Promise<void> | undefined
  #down = false

  constructor(options: KeySetOptions) {
    this.#options = {
      cooldownMs: 30_000,
      maxAgeMs: 600_000,
      timeoutMs: 5_000,
      now: () => performance.now(),
      ...options,
    }
    this.#jwksUrl = options.jwksUrl
  }

  /** The key for a JWT's protected header; throws (a refusal, never a crash) when none can be had. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    if (this.#local === undefined) await this.#refresh()
    else if (this.#options.now() - this.#fetchedAt >= this.#options.maxAgeMs) void this.#refresh()
    const local = this.#local
    if (local === undefined) throw new errors.JWKSNoMatchingKey('no signing keys could be fetched')
    try {
      return await local(header, token)
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err
      await this.#refresh()
      if (this.#local === local) throw err
      return this.#local!(header, token)
    }
  }

  /** Fetches the keys unless a fetch is under way or one was tried within the cooldown. */
  #refresh(): Promise<void> {
    if (this.#pending !== undefined) return this.#pending
    if (this.#options.now() - this.#triedAt < this.#options.cooldownMs) return Promise.resolve()
    this.#triedAt = this.#options.now()
    this.#pending = this.#fetch().finally(() => (this.#pending = undefined))
    return this.#pending
  }

  async #fetch(): Promise<void> {
    try {
      const jwks = await fetchJson(this.#jwksUrl ?? (await this.#discover()), this.#options.timeoutMs)
      this.#local = createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0])
      this.#fetchedAt = this.#options.now()
      if (this.#down) this.#options.onRecovery?.()
      this.#down = false
    } catch (err) {
      if (!this.#down) this.#options.onOutage?.(err)
      this.#down = true
    }
  }

  /** The `jwks_uri` the issuer's OpenID configuration names, once it names this issuer (RFC 8414 §3.3). */
  async #discover(): Promise<string> {
    const issuer = this.#options.issuer
    const document = (await fetchJson(
      `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`,
      this.#options.timeoutMs,
    )) as { issuer?: unknown; jwks_uri?: unknown }
    if (document.issuer !== issuer) {
      throw new Error(`the OpenID configuration names issuer ${JSON.stringify(document.issuer)?.slice(0, 200)}`)
    }
    if (typeof document.jwks_uri !== 'string') throw new Error('the OpenID configuration has no jwks_uri')
    this.#jwksUrl = document.jwks_uri
    return document.jwks_uri
  }
}
