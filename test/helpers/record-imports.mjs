// Loaded with `node --import`: records every module specifier the process resolves (ESM imports, and the CommonJS
// requires Node routes through the same hooks) to the file PLANTSTORE_TEST_IMPORTS names, one per line.
import { register } from 'node:module'

register(new URL('./record-imports-hooks.mjs', import.meta.url), {
  data: { file: process.env.PLANTSTORE_TEST_IMPORTS },
})
