import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, test } from 'node:test'
import { REPO_ROOT } from './helpers/server-process.js'

const SRC = join(REPO_ROOT, 'src')

interface Import {
  /** The module imported: a path under src/ (`storage/types.ts`) or a package name (`fastify`). */
  target: string
  /** `import type`: only the compiler reads it. */
  typeOnly: boolean
  /** `import(...)`: loaded when that line runs, not with the module. */
  dynamic: boolean
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  )
}

const STATIC = /^\s*(import|export)\s+(type\s+)?(?:[^'"]*?\s+from\s+)?['"]([^'"]+)['"]/gm
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g

/** Every import of a source file, relative ones resolved to paths under src/. */
function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8')
  const target = (specifier: string) => {
    if (!specifier.startsWith('.')) return specifier.startsWith('node:') ? specifier : packageOf(specifier)
    return relative(SRC, resolve(dirname(file), specifier)).replace(/\.js$/, '.ts')
  }
  const found: Import[] = []
  for (const match of text.matchAll(STATIC)) {
    found.push({ target: target(match[3]!), typeOnly: match[2] !== undefined, dynamic: false })
  }
  for (const match of text.matchAll(DYNAMIC)) found.push({ target: target(match[1]!), typeOnly: false, dynamic: true })
  return found
}

const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/')

const graph = new Map(sources(SRC).map((file) => [relative(SRC, file), importsOf(file)]))

/**
 * Layers, lowest first: a module may import from its own layer or lower ones, never higher. The house rule:
 * cli → server → app → routes and plugins → domain → storage.
 */
const LAYERS: Array<[layer: string, modules: RegExp]> = [
  ['storage', /^storage\//],
  ['base', /^(errors|redact|version)\.ts$/],
  ['domain', /^(auth|webhooks|limits|schemas)\/|^(config|configured-storage)\.ts$/],
  ['http', /^(routes|plugins)\//],
  ['app', /^app\.ts$/],
  ['server', /^server\.ts$/],
  ['cli', /^cli\//],
]

function layerOf(module: string): number {
  const index = LAYERS.findIndex(([, pattern]) => pattern.test(module))
  assert.notEqual(index, -1, `${module} belongs to no layer: add it to LAYERS`)
  return index
}

/** The modules `entry` loads when it is loaded: static imports followed, `import type` and `import()` not. */
function loadedBy(entry: string): Set<string> {
  const seen = new Set<string>([entry])
  const queue = [entry]
  for (let module = queue.pop(); module !== undefined; module = queue.pop()) {
    for (const { target, typeOnly, dynamic } of graph.get(module) ?? []) {
      if (typeOnly || dynamic || seen.has(target)) continue
      seen.add(target)
      queue.push(target)
    }
  }
  return seen
}

describe('the import graph of src/', () => {
  test('has every module on a layer, importing nothing from a higher one', () => {
    const upward: string[] = []
    for (const [module, imports] of graph) {
      for (const { target } of imports) {
        if (!graph.has(target)) continue
        if (layerOf(target) > layerOf(module)) upward.push(`${module} → ${target}`)
      }
    }
    assert.deepEqual(upward, [])
  })

  test('keeps storage a leaf: it imports nothing of src/ outside src/storage/', () => {
    const outward = [...graph]
      .filter(([module]) => module.startsWith('storage/'))
      .flatMap(([module, imports]) => imports.map(({ target }) => [module, target]))
      .filter(([, target]) => graph.has(target!) && !target!.startsWith('storage/'))
    assert.deepEqual(outward, [])
  })

  test('starts the CLI without the HTTP stack: only running serve loads server.ts, app.ts and Fastify', () => {
    const loaded = loadedBy('cli/main.ts')
    const http = [...loaded].filter(
      (module) =>
        /^(server|app)\.ts$|^(routes|plugins)\//.test(module) ||
        /^(fastify|@fastify\/.*|prom-client|pino-pretty)$/.test(module),
    )
    assert.deepEqual(http, [])
    const serve = graph.get('cli/main.ts')!.filter(({ target }) => target === 'cli/serve.ts')
    assert.deepEqual(serve, [{ target: 'cli/serve.ts', typeOnly: false, dynamic: true }])
    assert.ok(loadedBy('cli/serve.ts').has('app.ts'), 'the graph follows imports: serve does load the app')
  })
})
