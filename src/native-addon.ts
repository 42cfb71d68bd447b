// A native module (better-sqlite3's) built by one Node.js and loaded by another fails with Node's own text, which
// names a NODE_MODULE_VERSION, not a Node.js version, and suggests `npm rebuild` of everything. Said plainly instead.

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

/**
 * For an error loading a native module built against another Node.js, the one line that says so: which package,
 * for which Node.js and ABI it was built, which this one is and needs, and the command that fixes it. Else undefined.
 */
export function wrongNodeMessage(err: unknown, node = process.versions.node): string | undefined {
  const groups = WRONG_ABI.exec(err instanceof Error ? err.message : String(err))?.groups
  if (groups === undefined) return undefined
  const { path, built, required } = groups as { path: string; built: string; required: string }
  const name = packageOf(path)
  const builtFor = NODE_OF_ABI[built] === undefined ? 'another Node.js' : `Node.js ${NODE_OF_ABI[built]}`
  return (
    `${name} was built for ${builtFor} (NODE_MODULE_VERSION ${built}), but this is Node.js ${node} ` +
    `(NODE_MODULE_VERSION ${required}): run \`npm rebuild ${name}\` with this Node.js, or run plantstore with the ` +
    `Node.js that installed it`
  )
}
