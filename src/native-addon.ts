// A native module (better-sqlite3's) built by one Node.js and loaded by another fails with Node's own text, which
// names a NODE_MODULE_VERSION, not a Node.js version, and suggests `npm rebuild` of everything. Said plainly instead.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

// The NODE_MODULE_VERSION of each Node.js release line (nodejs/node, doc/abi_version_registry.json).
const NODE_OF_ABI: Record<string, string> = {
  '108': '18',
  '111': '19',
  '115': '20',
  '120': '21',
  '127': '22',
  '131': '23',
  '137': '24',
  '141': '25',
  '147': '26',
  '153': '27',
}

// Node's message: "The module '<path>'\nwas compiled against a different Node.js version using\nNODE_MODULE_VERSION
// 127. This version of Node.js requires\nNODE_MODULE_VERSION 115. Please try re-compiling or re-installing ...".
const WRONG_ABI =
  /The module '(?<path>.*)'\s+was compiled against a different Node\.js version using\s+NODE_MODULE_VERSION (?<built>\d+)\.\s+This version of Node\.js requires\s+NODE_MODULE_VERSION (?<required>\d+)/

/** The package a file belongs to: the name after its last node_modules/ (scoped ones too), else the file's path. */
function packageOf(path: string): string {
  const match = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path)
  return match?.[1] ?? path
}

/** The Node.js whose headers a folder holds (`<dir>/include/node/node_version.h`): version and ABI. */
interface Headers {
  version: string
  abi: string
}

/** The Node.js version and NODE_MODULE_VERSION of the headers under `dir`, or undefined where there are none. */
function headersIn(dir: string): Headers | undefined {
  let text: string
  try {
    text = readFileSync(join(dir, 'include', 'node', 'node_version.h'), 'utf8')
  } catch {
    return undefined
  }
  const number = (name: string) => new RegExp(`#define NODE_${name}_VERSION (\\d+)`).exec(text)?.[1]
  const [major, minor, patch, abi] = ['MAJOR', 'MINOR', 'PATCH', 'MODULE'].map(number)
  if (major === undefined || minor === undefined || patch === undefined || abi === undefined) return undefined
  return { version: `${major}.${minor}.${patch}`, abi }
}

/**
 * npm's `nodedir` as npm reads it (its environment variable, then the project's, user's and global .npmrc): the
 * headers node-gyp builds against instead of the running Node.js's. Asked of npm itself only on this error's path.
 */
function npmNodedir(): string | undefined {
  const fromEnv = process.env.npm_config_nodedir
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv
  try {
    const stdio: ['ignore', 'pipe', 'ignore'] = ['ignore', 'pipe', 'ignore']
    const value = execFileSync('npm', ['config', 'get', 'nodedir'], { encoding: 'utf8', stdio, timeout: 10_000 })
    return ['', 'undefined', 'null'].includes(value.trim()) ? undefined : value.trim()
  } catch {
    return undefined
  }
}

/** What the rebuild advice depends on: this Node.js, npm's nodedir, and this Node.js's install prefix. */
export interface NodeContext {
  node: string
  nodedir: string | undefined
  /** Where this Node.js is installed (`<prefix>/bin/node`); its headers, if installed, are under it. */
  prefix: string
}

const thisNode = (): NodeContext => ({
  node: process.versions.node,
  nodedir: npmNodedir(),
  prefix: dirname(dirname(process.execPath)),
})

/**
 * The command that rebuilds `name` for the Node.js whose ABI is `abi`. A plain `npm rebuild` builds against npm's
 * nodedir when set: headers of another Node.js there give the same module again, so the command points npm at
 * this Node.js's own headers, or says to drop the setting (node-gyp then fetches the right ones).
 */
function rebuildAdvice(name: string, abi: string, context: NodeContext): string {
  const plain = `run \`npm rebuild ${name}\` with this Node.js`
  if (context.nodedir === undefined) return plain
  const configured = headersIn(context.nodedir)
  if (configured === undefined || configured.abi === abi) return plain
  const why =
    `npm's nodedir (${context.nodedir}) holds the headers of Node.js ${configured.version} ` +
    `(NODE_MODULE_VERSION ${configured.abi}), which a plain \`npm rebuild\` would build for again`
  if (headersIn(context.prefix)?.abi === abi)
    return `${why}: run \`npm_config_nodedir=${context.prefix} npm rebuild ${name}\` with this Node.js`
  return (
    `${why}: drop that setting (\`npm config delete nodedir\`, or unset npm_config_nodedir), then run ` +
    `\`npm rebuild ${name}\` with this Node.js (node-gyp fetches its headers)`
  )
}

/**
 * For an error loading a native module built against another Node.js, the one line that says so: which package,
 * for which Node.js and ABI it was built, which this one is and needs, and the command that fixes it. Else undefined.
 */
export function wrongNodeMessage(err: unknown, context: () => NodeContext = thisNode): string | undefined {
  const groups = WRONG_ABI.exec(err instanceof Error ? err.message : String(err))?.groups
  if (groups === undefined) return undefined
  const { path, built, required } = groups as { path: string; built: string; required: string }
  const name = packageOf(path)
  const running = context()
  const builtFor = NODE_OF_ABI[built] === undefined ? 'another Node.js' : `Node.js ${NODE_OF_ABI[built]}`
  return (
    `${name} was built for ${builtFor} (NODE_MODULE_VERSION ${built}), but this is Node.js ${running.node} ` +
    `(NODE_MODULE_VERSION ${required}): ${rebuildAdvice(name, required, running)}, or run plantstore with the ` +
    `Node.js that installed it`
  )
}
