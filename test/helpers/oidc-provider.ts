import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose'

/** A real OpenID provider (panva's oidc-provider) on loopback that issues RFC 9068 JWT access tokens. */
export interface TestIdp {
  /** e.g. http://127.0.0.1:PORT; exactly the `iss` of the tokens; discovery at issuer + '/.well-known/openid-configuration'. */
  issuer: string
  /** An access token for `clientId` with these scopes, for the audience (resource indicator) `audience`, via POST to the token endpoint with client_secret_basic. Rejects with the provider's error otherwise. */
  token(options: { clientId: string; scopes: string[]; audience?: string }): Promise<string>
  close(): Promise<void>
}

/** Every scope the provider knows and every client may ask for. */
const SCOPE = 'plants:read plants:write webhooks:manage tokens:manage'
const TOKEN_PATH = '/token'

// oidc-provider ships no type declarations; this is the little of it used here.
interface Provider {
  callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>
  on(event: 'server_error', listener: (ctx: unknown, error: Error) => void): void
}
type ProviderClass = new (issuer: string, configuration: Record<string, unknown>) => Provider

let providerClass: Promise<ProviderClass> | undefined

/** Imports oidc-provider once, dropping the one warning it prints on import when Node is older than 22 LTS. */
function loadProvider(): Promise<ProviderClass> {
  providerClass ??= (async () => {
    const warn = console.warn
    console.warn = (...args: unknown[]) => {
      if (String(args[0]).includes('oidc-provider WARNING: Unsupported runtime')) return
      warn(...args)
    }
    try {
      // A variable specifier keeps tsc from asking for the declarations the package lacks.
      const specifier = 'oidc-provider'
      const module = (await import(specifier)) as { default: ProviderClass }
      return module.default
    } finally {
      console.warn = warn
    }
  })()
  return providerClass
}

/**
 * A plain in-memory adapter: passing any adapter keeps the provider from warning about its development one.
 * JWT access tokens are never stored, so this only ever holds what the provider keeps on the side.
 */
function memoryAdapter() {
  const store = new Map<string, Record<string, unknown>>()
  return (model: string) => ({
    async upsert(id: string, payload: Record<string, unknown>) {
      store.set(`${model}:${id}`, payload)
    },
    async find(id: string) {
      return store.get(`${model}:${id}`)
    },
    async findByUid(uid: string) {
      for (const [key, payload] of store) if (key.startsWith(`${model}:`) && payload.uid === uid) return payload
      return undefined
    },
    async findByUserCode(userCode: string) {
      for (const [key, payload] of store)
        if (key.startsWith(`${model}:`) && payload.userCode === userCode) return payload
      return undefined
    },
    async consume(id: string) {
      const payload = store.get(`${model}:${id}`)
      if (payload) payload.consumed = Math.floor(Date.now() / 1000)
    },
    async destroy(id: string) {
      store.delete(`${model}:${id}`)
    },
    async revokeByGrantId(grantId: string) {
      for (const [key, payload] of store) if (payload.grantId === grantId) store.delete(key)
    },
  })
}

/** Starts an IdP on 127.0.0.1 and a free port, with `clients` as confidential client-credentials clients. */
export async function startIdp(options: {
  audience: string
  clients: string[]
  ttlSeconds?: number
}): Promise<TestIdp> {
  const ttl = options.ttlSeconds ?? 300
  const Provider = await loadProvider()

  // A fresh key per IdP, so a token from one IdP never verifies against another's JWKS.
  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const jwk = await exportJWK(privateKey)
  const signingKey = { ...jwk, kid: await calculateJwkThumbprint(jwk), alg: 'RS256', use: 'sig' }

  // The issuer has to name the port before the provider exists, so listen first and attach the provider after;
  // nobody knows the port until this function returns, so no request can arrive in between.
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const secrets = new Map(options.clients.map((clientId) => [clientId, randomBytes(24).toString('base64url')]))
  const provider = new Provider(issuer, {
    adapter: memoryAdapter(),
    jwks: { keys: [signingKey] },
    scopes: ['openid', ...SCOPE.split(' ')],
    clients: [...secrets].map(([clientId, secret]) => ({
      client_id: clientId,
      client_secret: secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: SCOPE,
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    routes: { token: TOKEN_PATH },
    // Each default left in place prints a warning when first used; none of these is exercised by a test otherwise.
    ttl: {
      ClientCredentials: (_ctx: unknown, token: { resourceServer?: { accessTokenTTL?: number } }) =>
        token.resourceServer?.accessTokenTTL ?? ttl,
    },
    clientBasedCORS: () => false,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => options.audience,
        useGrantedResource: () => true,
        // Any absolute URI is a resource server, so a test can mint a token for the wrong audience.
        getResourceServerInfo: (_ctx: unknown, resource: string) => ({
          scope: SCOPE,
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: ttl,
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
  })
  // The token endpoint only says "server_error"; keep the cause for the failure message.
  let lastServerError: Error | undefined
  provider.on('server_error', (_ctx, error) => (lastServerError = error))
  server.on('request', provider.callback())

  return {
    issuer,
    async token({ clientId, scopes, audience = options.audience }) {
      // An unknown client gets a made-up secret, so the provider (not this helper) answers invalid_client.
      const secret = secrets.get(clientId) ?? 'unknown-client'
      const body = new URLSearchParams({ grant_type: 'client_credentials', resource: audience })
      if (scopes.length) body.set('scope', scopes.join(' '))
      const credentials = `${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`
      const response = await fetch(issuer + TOKEN_PATH, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` },
        body,
      })
      const text = await response.text()
      if (!response.ok) {
        const cause = response.status >= 500 && lastServerError ? ` (${lastServerError.message})` : ''
        throw new Error(`token request for ${clientId} failed: ${response.status} ${text}${cause}`)
      }
      return (JSON.parse(text) as { access_token: string }).access_token
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}
