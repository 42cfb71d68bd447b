import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import semver from 'semver'
import { REPO_ROOT } from './helpers/server-process.js'

interface Manifest {
  engines: { node: string }
  workspaces: string[]
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
  allowScripts?: Record<string, boolean>
}

interface LockEntry {
  version?: string
  resolved?: string
  integrity?: string
  link?: boolean
  dependencies?: Record<string, string>
  devDependencies?: Record<string, string>
  engines?: { node?: string }
  hasInstallScript?: boolean
}

const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8')
const manifest = JSON.parse(read('package.json')) as Manifest
const lock = JSON.parse(read('package-lock.json')) as { lockfileVersion: number; packages: Record<string, LockEntry> }

/** The Node versions .ci/run tests: its node_releases, each VERSION or VERSION:HEADERS. */
const testedNodes = (/^node_releases=\(([^)]*)\)$/m.exec(read('.ci/run'))?.[1] ?? '')
  .split(/\s+/)
  .filter(Boolean)
  .map((release) => release.split(':')[0]!)

// Packages whose engines leave out a supported Node that the suite passes on, with that line. Both are ES modules that
// CommonJS code of Fastify's loads with require() (light-my-request, @fastify/static), which Node 20 does from 20.19
// on; npm install warns about them (EBADENGINE) on Node 20.
const RUN_THOUGH_UNDECLARED: Record<string, string> = {
  'node_modules/content-disposition': '20',
  'node_modules/cookie': '20',
}

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
      // The repository's own workspaces (the typed client), and node_modules' links to them.
      if (path === '' || manifest.workspaces.includes(path)) continue
      if (entry.link && manifest.workspaces.includes(entry.resolved ?? '')) continue
      assert.ok(!entry.link, `${path} is a link to a local folder`)
      assert.match(entry.version ?? '', /^\d+\.\d+\.\d+/, `${path} has an exact version`)
      assert.match(entry.integrity ?? '', /^sha512-/, `${path} has a sha512 integrity`)
      // A registry tarball, when the lockfile names one at all: never git, a local file or a plain-http address.
      if (entry.resolved !== undefined) assert.match(entry.resolved, /^https:\/\/[^/]+\/.+\.tgz$/, path)
    }
  })

  test('declares in engines the Node release lines CI runs the suite on, and no other', () => {
    const range = manifest.engines.node
    assert.deepEqual(lock.packages['']?.engines, manifest.engines, 'the lockfile has the same engines')
    assert.ok(testedNodes.length >= 2, `.ci/run names the versions it tests: ${testedNodes.join(' ')}`)
    for (const version of testedNodes) assert.ok(semver.satisfies(version, range), `${version} is in ${range}`)
    const testedLines = new Set(testedNodes.map((version) => semver.major(version)))
    for (let line = 16; line <= 40; line++) {
      assert.equal(semver.intersects(range, `${line}.x`), testedLines.has(line), `Node ${line} declared iff tested`)
    }
  })

  test('every locked package declares each supported Node, from the lowest version of its line to the one tested, or is listed as running there', () => {
    const range = manifest.engines.node
    const lowest = new semver.Range(range).set.map(
      (comparators) => semver.minVersion(comparators.map((comparator) => comparator.value).join(' '))!.version,
    )
    const undeclared = new Set<string>()
    for (const [path, entry] of Object.entries(lock.packages)) {
      const engines = entry.engines?.node
      if (path === '' || engines === undefined) continue
      for (const version of [...lowest, ...testedNodes]) {
        if (!semver.satisfies(version, engines)) undeclared.add(`${path} ${semver.major(version)}`)
      }
    }
    const listed = Object.entries(RUN_THOUGH_UNDECLARED).map(([path, line]) => `${path} ${line}`)
    assert.deepEqual([...undeclared].sort(), listed.sort())
  })

  // esbuild's postinstall only checks the binary its platform package (@esbuild/linux-x64 ...) already ships;
  // @scarf/scarf's reports installs to its vendor. better-sqlite3's builds or fetches the SQLite binding, without which
  // the service does not start.
  test("decides every locked package's install script: better-sqlite3's runs, every other is denied", () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== '' && entry.hasInstallScript === true)
      .map(([path]) => path.split('node_modules/').at(-1)!)
    const policy = manifest.allowScripts ?? {}
    assert.deepEqual(Object.keys(policy).sort(), [...new Set(withScripts)].sort(), 'allowScripts names each of them')
    for (const [name, allowed] of Object.entries(policy)) assert.equal(allowed, name === 'better-sqlite3', name)
  })

  test('the README lists every production dependency with its purpose, and no other', () => {
    const section = read('README.md').split('### Dependencies')[1]?.split('\n\n')[1] ?? ''
    const rows = section.split('\n').filter((line) => line.startsWith('| `'))
    const listed = rows.flatMap((row) => [...row.split('|')[1]!.matchAll(/`([^`]+)`/g)].map((match) => match[1]))
    assert.deepEqual(listed.sort(), Object.keys(manifest.dependencies).sort())
    for (const row of rows) assert.ok((row.split('|')[2] ?? '').trim().length > 10, `purpose given: ${row}`)
  })
})
