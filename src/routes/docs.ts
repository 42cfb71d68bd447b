import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import { ErrorCatalogue } from '../errors.js'
import { ErrorBody } from '../schemas/error.js'
import { Plant } from '../schemas/plant.js'

const catalogue = Object.values(ErrorCatalogue)
  .map(({ error, status, summary }) => `| ${error} | ${status} | ${summary} |`)
  .join('\n')

const description = `Create, list and delete plants, behind bearer tokens.

Every error response is \`application/json\` \`{error, message}\`; \`error\` is a stable value from this catalogue:

| error | status | cause |
|---|---|---|
${catalogue}

Every response carries \`X-Request-Id\` (a sane incoming one is echoed).`

/**
 * The OpenAPI 3.1 document, generated from the route schemas, at GET /openapi.json,
 * and an interactive reference at GET /docs served from installed packages.
 */
export async function registerDocs(app: FastifyInstance, version: string): Promise<void> {
  app.addSchema(ErrorBody)
  app.addSchema(Plant)
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Plant Store', description, version, license: { name: 'MIT' } },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearerAuth: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  })
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { validatorUrl: null },
    // Everything the page loads comes from this server: no CDN, no third-party validator badge.
    staticCSP:
      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'",
  })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}
