import { buildApp } from '../src/app.js'
import { openStorage } from '../src/storage/index.js'

/** An OpenAPI document, as far as the scripts here read one. */
export interface OpenApiDocument {
  components: { schemas: Record<string, SchemaObject> }
  [key: string]: unknown
}

/** A JSON Schema object of the document. */
export interface SchemaObject {
  [key: string]: unknown
}

/** The document the service serves at GET /openapi.json (built on an in-memory store, no port opened). */
export async function servedDocument(): Promise<OpenApiDocument> {
  const storage = await openStorage('sqlite::memory:', { migrate: true })
  const app = await buildApp({ storage })
  try {
    return (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
  } finally {
    await app.close()
    await storage.close()
  }
}
