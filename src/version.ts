import { createRequire } from 'node:module'

/** The package version, which is also the OpenAPI document's version. */
export const VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version
