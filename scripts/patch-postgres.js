// npm's postinstall: makes the installed postgres.js (pinned in package.json) send each message to its socket when it
// is written. As published, the client holds messages until they add up to 1 KB or a setImmediate runs, that is
// until the event loop has run every other I/O callback of its turn: a prepared statement's few hundred bytes
// reached PostgreSQL that much later under load, while its backend waited (bench/README.md, "PostgreSQL writes: the
// client's write delay", has the measurements). Idempotent; stops the install with one line when the installed
// client is not the text this was written for, so that a version change is looked at, not guessed. npm runs it on
// `npm install` and `npm ci`, not on `npm install <package>`: run `npm install` after changing postgres.js.
//
// `node scripts/patch-postgres.js --published DIR` copies the installed client to DIR as published instead: the
// benchmark's plain handler runs on it, as a user's hand-written server would.
// Plain JavaScript: it runs before there is anything compiled.
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const HELD = `    if (fn || chunk.length >= 1024)
      return nextWrite(fn)
    nextWriteTimer === null && (nextWriteTimer = setImmediate(nextWrite))
    return true
`
const WRITTEN_THROUGH = `    return nextWrite(fn) // plantstore: written through (scripts/patch-postgres.js)
`
// The ES module build (what the service imports) and the CommonJS one, alike.
const FILES = ['src/connection.js', 'cjs/src/connection.js']

// Its exports name no package.json: from the CommonJS entry, cjs/src/index.js, two folders up.
const installed = join(dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..')
const { version } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'))

/** Replaces `from` with `to` in the client at `root` (left as it is where `to` is there already). */
function rewrite(root, from, to) {
  for (const file of FILES.map((name) => join(root, name))) {
    const text = readFileSync(file, 'utf8')
    if (text.includes(to)) continue
    if (!text.includes(from)) {
      console.error(`scripts/patch-postgres.js: postgres ${version} is not the client this was written for (${file})`)
      process.exit(1)
    }
    writeFileSync(file, text.replace(from, to))
  }
}

const args = process.argv.slice(2)
if (args.length === 0) {
  rewrite(installed, HELD, WRITTEN_THROUGH)
} else if (args.length === 2 && args[0] === '--published') {
  cpSync(installed, args[1], { recursive: true })
  rewrite(args[1], WRITTEN_THROUGH, HELD)
} else {
  console.error('usage: node scripts/patch-postgres.js [--published DIR]')
  process.exit(2)
}
