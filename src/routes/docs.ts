import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { defaultText } from '../config.js'
import { ErrorBody } from '../schemas/error.js'
import { NewPlant, Plant } from '../schemas/plant.js'
import { TokenShape } from '../schemas/token.js'
import { SubscriptionShape } from '../schemas/webhook.js'
import { withRateLimitHeaders } from './rate-limit-headers.js'
import { SECURITY } from './security.js'

// What a newcomer needs first: a token and where to put it. The error values come with the Error schema, at the end.
const description = `Create, list, read and delete plants, behind bearer tokens.

**First, a token.** In the service's checkout, \`npx plantstore tokens create --account default\` prints one (scopes \`plants:read\` and \`plants:write\`; an installed service: docs/operations.md); the first start on an empty store prints one too. Press **Authorize** below, paste it under *bearerAuth*, and every **Try it out** sends it.

Every response carries \`X-Request-Id\` (a sane incoming one is echoed). While a rate limit is on, answers to a token carry \`RateLimit-Policy\` and \`RateLimit\` (draft-ietf-httpapi-ratelimit-headers-11): a client that waits \`t\` seconds when \`r\` is 0 is not refused. Errors are \`application/json\` \`{error, message}\`, their values listed with the Error schema, at the end of this page. Pages on the origins an operator lists in \`PLANTSTORE_CORS_ORIGINS\` may call the API from a browser (CORS; a preflight needs no token); by default no origin may.`

// The top bar's mark: the service's name where Swagger UI would show Fastify's logo.
const LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="220" height="40" viewBox="0 0 220 40"><text x="0" y="28" font-family="sans-serif" font-size="24" font-weight="700" fill="#ffffff">Plant Store API</text></svg>`

const JWT_SCHEME = [
  "An OAuth 2.0 access token from the operator's identity provider (RFC 9068), accepted where `PLANTSTORE_JWT_ISSUER` is set.",
  "Signed with an asymmetric key from the issuer's key set, by an algorithm of `PLANTSTORE_JWT_ALGORITHMS`",
  `(\`${defaultText('PLANTSTORE_JWT_ALGORITHMS')}\` by default; never \`none\` or HMAC); \`iss\` and \`aud\` exactly as configured;`,
  `\`exp\` required, \`nbf\` and \`iat\` honoured with \`PLANTSTORE_JWT_CLOCK_TOLERANCE\` of leeway (${defaultText('PLANTSTORE_JWT_CLOCK_TOLERANCE')} s by default);`,
  'header `typ` `at+jwt` or `JWT`.',
  `The account is named by the claim \`PLANTSTORE_JWT_ACCOUNT_CLAIM\` (\`${defaultText('PLANTSTORE_JWT_ACCOUNT_CLAIM')}\` by default), created on first use.`,
  'Scopes come from `scope` (space-delimited) or `scp` (an array): `plants:read`, `plants:write`, `webhooks:manage`,',
  '`tokens:manage`; others are ignored. A bad, expired or unverifiable token gets 401 `invalid_token`.',
].join(' ')

const header = (name: string, description: string) =>
  ({ name, in: 'header', required: true, description, schema: { type: 'string' } }) as const

const signatureHeaders = [
  header('webhook-id', 'The event id, the same on every attempt: drop an event whose id you have seen'),
  header('webhook-timestamp', 'Seconds since the Unix epoch when this attempt was signed; refuse old ones (replays)'),
  header(
    'webhook-signature',
    '`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the bytes of the ' +
      "subscription's secret (the base64 after `whsec_`); Standard Webhooks",
  ),
  header('plantstore-event-type', 'plant.created or plant.deleted'),
]

function webhook(summary: string, description: string, schema: Record<string, unknown>) {
  return {
    post: {
      summary,
      description,
      parameters: signatureHeaders,
      requestBody: { required: true, content: { 'application/json': { schema } } },
      responses: {
        '200': {
          description: 'Any 2xx within the timeout (10 s by default) counts as received; anything else is retried',
        },
      },
    },
  }
}

const webhooks = {
  'plant.created': webhook(
    'A plant was added to the store',
    "Information about a new plant added to the store (the contract's `/plant/webhook`): the NewPlant, id exact. " +
      'Delivered at least once to each subscription that wants it, in order per subscription, retried with ' +
      'exponential backoff for at least 24 hours.',
    { $ref: '#/components/schemas/NewPlant' },
  ),
  'plant.deleted': webhook('A plant was deleted', 'The id of the plant deleted.', {
    type: 'object',
    required: ['id'],
    additionalProperties: false,
    properties: { id: { type: 'integer', format: 'int64' } },
    examples: [{ id: 1 }],
  }),
}

const COPIES = new Set(['/docs/json', '/docs/yaml'])

function hideCopies(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  if (COPIES.has(request.routeOptions.url ?? '')) reply.callNotFound()
  else done()
}

/**
 * The OpenAPI 3.1 document, generated from the route schemas, at GET /openapi.json,
 * and an interactive reference at GET /docs served from installed packages.
 */
export async function registerDocs(app: FastifyInstance, version: string): Promise<void> {
  app.addSchema(ErrorBody)
  app.addSchema(Plant)
  app.addSchema(NewPlant)
  // Shared schemas are added here, at the root: a plugin that adds its own gets Fastify's default validator.
  app.addSchema(SubscriptionShape)
  app.addSchema(TokenShape)
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Plant Store', description, version, license: { name: 'MIT', identifier: 'MIT' } },
      // Relative: every instance serves its own document, and "Try it out" calls the instance that served it.
      servers: [{ url: '/', description: 'The instance serving this document' }],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              'A token of the service (`pst_…`), made with `plantstore tokens create` or `POST /tokens`; its scopes are those it was made with.',
          },
          jwtBearer: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: JWT_SCHEME,
          },
        },
      },
      tags: [
        { name: 'plants', description: "The caller's account's plants" },
        {
          name: 'webhooks',
          description: "Subscriptions to the account's plant events, delivered as Standard Webhooks",
        },
        { name: 'tokens', description: "The caller's account's own tokens (scope tokens:manage)" },
        { name: 'health', description: 'Liveness and readiness, for load balancers and orchestrators; no token' },
      ],
      security: SECURITY,
      webhooks,
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transformObject: (made) =>
      'openapiObject' in made ? withRateLimitHeaders(made.openapiObject) : made.swaggerObject,
  })
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // The page loads the one public document. With `urls` Swagger UI fetches only that (its `url`, ./json, is
    // fixed by the plugin and then left alone).
    uiConfig: { validatorUrl: null, urls: [{ url: '/openapi.json', name: 'Plant Store API' }] },
    // The plugin's copies of the document (/docs/json, /docs/yaml) answer as any unknown route: one document, one URL.
    uiHooks: { onRequest: hideCopies },
    logo: { type: 'image/svg+xml', content: Buffer.from(LOGO), href: '/docs', target: '_self' },
    theme: { title: 'Plant Store API reference' },
    // Everything the page loads comes from this server: no CDN, no third-party validator badge.
    staticCSP:
      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'",
  })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}
