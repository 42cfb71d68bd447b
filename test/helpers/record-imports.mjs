// Loaded with `node --import`: records every module specifier the process resolves (its imports and, where the
// hooks see them, its requires) to the file PLANTSTORE_TEST_IMPORTS names, one per line. Node 22.15 and later run
// the hooks in the thread (registerHooks); Node 20 only has them in a thread of their own (register).
import { appendFileSync } from 'node:fs'
import module from 'node:module'

const file = process.env.PLANTSTORE_TEST_IMPORTS

if (typeof module.registerHooks === 'function') {
  module.registerHooks({
    resolve(specifier, context, next) {
      if (file) appendFileSync(file, specifier + '\n')
      return next(specifier, context)
    },
  })
} else {
  module.register(new URL('./record-imports-hooks.mjs', import.meta.url), { data: { file } })
}
