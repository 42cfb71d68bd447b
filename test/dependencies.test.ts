import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { REPO_ROOT } from './helpers/server-process.js'

interface Manifest {
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}

interface LockEntry {
  version?: string
  resolved?: string
  integrity?: string
  link?: boolean
  dependencies?: Record<string, string>
  devDependencies?: Record<string, string>
}

const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8')
const manifest = JSON.parse(read('package.json')) as Manifest
const lock = JSON.parse(read('package-lock.json')) as { lockfileVersion: number; packages: Record<string, LockEntry> }

describe('dependencies', () => {
  test('the lockfile is in step with package.json', () => {
    assert.ok(lock.lockfileVersion >= 3)
    const root = lock.packages['']!
    assert.deepEqual(root.dependencies, manifest.dependencies)
    assert.deepEqual(root.devDependencies, manifest.devDependencies)
    for (const name of [...Object.keys(manifest.dependencies), ...Object.keys(manifest.devDependencies)]) {
      assert.ok(lock.packages[`node_modules/${name}`]?.version, `${name} is pinned`)
    }
  })

  test('pins every package, direct or not, to one version from the registry with its sha512 integrity', () => {
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === '') continue
      assert.ok(!entry.link, `${path} is a link to a local folder`)
      assert.match(entry.version ?? '', /^\d+\.\d+\.\d+/, `${path} has an exact version`)
      assert.match(entry.integrity ?? '', /^sha512-/, `${path} has a sha512 integrity`)
      // A registry tarball, when the lockfile names one at all: never git, a local file or a plain-http address.
      if (entry.resolved !== undefined) assert.match(entry.resolved, /^https:\/\/[^/]+\/.+\.tgz$/, path)
    }
  })

  test('the README lists every production dependency with its purpose, and no other', () => {
    const section = read('README.md').split('### Dependencies')[1]?.split('\n\n')[1] ?? ''
    const rows = section.split('\n').filter((line) => line.startsWith('| `'))
    const listed = rows.flatMap((row) => [...row.split('|')[1]!.matchAll(/`([^`]+)`/g)].map((match) => match[1]))
    assert.deepEqual(listed.sort(), Object.keys(manifest.dependencies).sort())
    for (const row of rows) assert.ok((row.split('|')[2] ?? '').trim().length > 10, `purpose given: ${row}`)
  })
})
