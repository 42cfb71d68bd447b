import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, test } from 'node:test'
import ts from 'typescript'
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

/** Every import of a source file, read by the TypeScript parser; relative ones resolved to paths under src/. */
function importsOf(file: string): Import[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest)
  const target = (specifier: string) => {
    if (!specifier.startsWith('.')) return specifier.startsWith('node:') ? specifier : packageOf(specifier)
    return relative(SRC, resolve(dirname(file), specifier)).replace(/\.js$/, '.ts')
  }
  const found: Import[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const typeOnly = node.importClause?.isTypeOnly === true
      found.push({ target: target(node.moduleSpecifier.text), typeOnly, dynamic: false })
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ target: target(node.moduleSpecifier.text), typeOnly: node.isTypeOnly, dynamic: false })
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [specifier] = node.arguments
      // An import of a computed name would escape every rule here: none is allowed.
      assert.ok(specifier && ts.isStringLiteralLike(specifier), `${relative(SRC, file)}: import() of a computed name`)
      found.push({ target: target(specifier.text), typeOnly: false, dynamic: true })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/')

const graphOf = (dir: string) => new Map(sources(dir).map((file) => [relative(SRC, file), importsOf(file)]))
const graph = graphOf(SRC)

/** A loop of imports in `modules` (edges between them only, `import type` included), or undefined when none. */
function findCircle(modules: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>()
  const path: string[] = []
  const visit = (module: string): string[] | undefined => {
    if (state.get(module) === 'done') return undefined
    if (state.get(module) === 'open') return [...path.slice(path.indexOf(module)), module]
    state.set(module, 'open')
    path.push(module)
    for (const target of modules.get(module) ?? []) {
      const circle = modules.has(target) ? visit(target) : undefined
      if (circle) return circle
    }
    path.pop()
    state.set(module, 'done')
    return undefined
  }
  for (const module of modules.keys()) {
    const circle = visit(module)
    if (circle) return circle
  }
  return undefined
}

const targetsOf = (modules: Map<string, Import[]>) =>
  new Map([...modules].map(([module, imports]) => [module, imports.map(({ target }) => target)]))

/** `auth/jwt.ts` → `auth`, `config.ts` → `config.ts`: the folder (or lone file) a module belongs to. */
const unitOf = (module: string) => module.split('/')[0]!

/**
 * Layers, lowest first: a module may import from its own layer or lower ones, never higher. The house rule:
 * cli → server → app → routes → plugins (request hooks) → socket (connection defences) → logging → settings →
 * schemas → domain → base → storage. The schemas (the API's shapes) are built from the domain's constants
 * (scopes, event types); the domain never reads a schema.
 */
const LAYERS: Array<[layer: string, modules: RegExp]> = [
  ['storage', /^storage\//],
  ['base', /^(errors|maybe-async|native-addon|redact|text-rules|version)\.ts$/],
  ['domain', /^(auth|webhooks|limits)\//],
  ['schemas', /^schemas\//],
  ['settings', /^(config|configured-storage|unknown-settings)\.ts$/],
  ['logging', /^logging\//],
  ['tracing', /^tracing\//],
  ['socket', /^socket\//],
  ['plugins', /^plugins\//],
  ['routes', /^routes\//],
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

  test('has no circle of imports between its files, type imports included', () => {
    assert.equal(findCircle(targetsOf(graph))?.join(' → '), undefined)
  })

  test('has no two folders importing each other, through however many others', () => {
    const units = new Map<string, string[]>()
    for (const [module, imports] of graph) {
      const from = unitOf(module)
      const targets = imports.map(({ target }) => target).filter((target) => graph.has(target))
      const others = targets.map(unitOf).filter((unit) => unit !== from)
      units.set(from, [...(units.get(from) ?? []), ...others])
    }
    assert.equal(findCircle(units)?.join(' → '), undefined)
  })

  test('reaches storage from outside it through its front door, storage/index.ts, alone', () => {
    const around = [...graph]
      .filter(([module]) => !module.startsWith('storage/'))
      .flatMap(([module, imports]) => imports.map(({ target }) => [module, target]))
      .filter(([, target]) => target!.startsWith('storage/') && target !== 'storage/index.ts')
      .map(([module, target]) => `${module} → ${target}`)
    assert.deepEqual(around, [])
  })

  test('starts the CLI without the HTTP stack: only running serve loads server.ts, app.ts and Fastify', () => {
    const loaded = loadedBy('cli/main.ts')
    const http = [...loaded].filter(
      (module) =>
        /^(server|app)\.ts$|^(routes|plugins|socket|logging)\//.test(module) ||
        /^(fastify|@fastify\/.*|prom-client|pino-pretty)$/.test(module),
    )
    assert.deepEqual(http, [])
    const serve = graph.get('cli/main.ts')!.filter(({ target }) => target === 'cli/serve.ts')
    assert.deepEqual(serve, [{ target: 'cli/serve.ts', typeOnly: false, dynamic: true }])
    // Nor does any other command reach them, not even by an import() of its own.
    const reaching = [...graph]
      .filter(([module]) => module.startsWith('cli/') && module !== 'cli/serve.ts')
      .flatMap(([module, imports]) =>
        imports.filter(({ target }) => /^(server|app)\.ts$/.test(target)).map(({ target }) => `${module} → ${target}`),
      )
    assert.deepEqual(reaching, [])
    assert.ok(loadedBy('cli/serve.ts').has('app.ts'), 'the graph follows imports: serve does load the app')
  })
})

describe('the import graph of bench/', () => {
  test('has no circle of imports between its files, type imports included', () => {
    const bench = graphOf(join(REPO_ROOT, 'bench'))
    assert.ok(bench.size > 10, 'the graph reads bench/')
    assert.equal(findCircle(targetsOf(bench))?.join(' → '), undefined)
  })
})

describe("the benchmark's own servers", () => {
  // The reference and the plain handler stand for what a user writes by hand: no code of the service's, and no
  // module of the harness either, since each is compiled alone (bench/servers.ts compileScript).
  const ALLOWED = /^(node:.*|fastify|better-sqlite3|postgres)$/
  for (const name of ['reference-server', 'plain-server']) {
    test(`import nothing but Node, Fastify and the database clients: bench/${name}.ts`, () => {
      const file = join(REPO_ROOT, 'bench', `${name}.ts`)
      const foreign = importsOf(file)
        .map(({ target }) => target)
        .filter((target) => !ALLOWED.test(target))
      assert.deepEqual(foreign, [])
    })
  }
})
