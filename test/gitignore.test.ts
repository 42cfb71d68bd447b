import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { describe, test } from 'node:test'
import { REPO_ROOT } from './helpers/server-process.js'

// What the commands write into a checkout, as the docs name it: each holds token hashes or webhook signing secrets.
const SECRET_FILES = [
  'data/plantstore.db',
  'data/plantstore.db-wal',
  'data/plantstore.db-shm',
  'nightly.db',
  // A backup's temporary file and its journal (src/storage/sqlite/backup-temp.ts), left by one killed outright.
  'nightly.db.4242-host.0123456789ab.tmp',
  'nightly.db.4242-host.0123456789ab.tmp-journal',
  // docs/operations.md's export, another common name for NDJSON, and an export's file before it is whole.
  'store.ndjson',
  'plantstore-export.jsonl',
  '.store.ndjson.0123456789ab.partial',
]

describe('the repository’s .gitignore', () => {
  test('keeps stores, backups, exports and their temporary files out of git', () => {
    // Exit 1 when none is ignored: the list below is then empty all the same.
    let ignored = ''
    try {
      ignored = execFileSync('git', ['check-ignore', '--no-index', ...SECRET_FILES], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
      })
    } catch (err) {
      ignored = (err as { stdout: string }).stdout
    }
    assert.deepEqual(ignored.split('\n').filter(Boolean), SECRET_FILES)
  })
})
