import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload, type CryptoKey } from 'jose'
import type { JwtSettings } from '../../src/auth/jwt-auth.js'

export const AUDIENCE = 'https://plantstore.test'

/** One signing key: its `kid`, algorithm, private key and public JWK. */
export interface SigningKey {
  kid: string
  alg: 'RS256' | 'ES256' | 'EdDSA'
  privateKey: CryptoKey
  jwk: JWK
}

export async function signingKey(kid: string, alg: SigningKey['alg'] = 'RS256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } }
}

/**
 * A bare JWKS server on loopback, standing in for an identity provider's key endpoint: it publishes the keys in
 * `published`, counts the requests it gets, and can be stopped and started again on the same port.
 */
export class JwksServer {
  published: SigningKey[]
  requests = 0
  #server: Server | undefined
  #port = 0

  private constructor(keys: SigningKey[]) {
    this.published = keys
  }

  static async start(keys: SigningKey[]): Promise<JwksServer> {
    const jwks = new JwksServer(keys)
    await jwks.resume()
    return jwks
  }

  get issuer(): string {
    return `http://127.0.0.1:${this.#port}`
  }

  get url(): string {
    return `${this.issuer}/jwks`
  }

  /** The app settings for tokens of this issuer, with a short key-fetch cooldown so tests need not wait 30 s. */
  settings(overrides: Partial<JwtSettings> = {}): JwtSettings {
    return {
      issuer: this.issuer,
      audience: AUDIENCE,
      jwksUrl: this.url,
      accountClaim: 'sub',
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      clockToleranceSeconds: 30,
      keys: { cooldownMs: 200, timeoutMs: 1000 },
      ...overrides,
    }
  }

  /** A token signed with `key`: by default a valid at+jwt for `sub` with `scope`, expiring in 5 minutes. */
  async sign(key: SigningKey, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000)
    return new SignJWT({ iss: this.issuer, aud: AUDIENCE, iat: now, exp: now + 300, ...claims })
      .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'at+jwt', ...header })
      .sign(key.privateKey)
  }

  async stop(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    if (server === undefined) return
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }

  async resume(): Promise<void> {
    const server = createServer((_req, res) => {
      this.requests++
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ keys: this.published.map((key) => key.jwk) }))
    })
    await new Promise<void>((resolve) => server.listen(this.#port, '127.0.0.1', resolve))
    this.#port = (server.address() as AddressInfo).port
    this.#server = server
  }
}
