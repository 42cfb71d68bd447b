import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { wrongNodeMessage, type NodeContext } from '../src/native-addon.js'
import { cleanup, REPO_ROOT, tempDir } from './helpers/server-process.js'

after(cleanup)

// A native module that registers itself for another Node.js, the way one built by that Node.js does; no Node headers
// needed, only the C compiler that building better-sqlite3 from source needs anyway.
const WRONG_ABI_ADDON = `
struct node_module {
  int nm_version;
  unsigned int nm_flags;
  void *nm_dso_handle;
  const char *nm_filename;
  void *nm_register_func;
  void *nm_context_register_func;
  const char *nm_modname;
  void *nm_priv;
  struct node_module *nm_link;
};
extern void node_module_register(void *);
static struct node_module module = { ABI, 0, 0, "wrong-abi.c", 0, 0, "wrong_abi", 0, 0 };
static void __attribute__((constructor)) registration(void) { node_module_register(&module); }
`

// Another Node.js line than this one: 22 (NODE_MODULE_VERSION 127), or 24 when this is 22.
const OTHER = process.versions.modules === '127' ? { abi: '137', node: '24' } : { abi: '127', node: '22' }

/** Compiles the addon above for OTHER's ABI to `file`. */
function buildWrongAddon(file: string): void {
  const source = join(tempDir(), 'wrong-abi.c')
  writeFileSync(source, WRONG_ABI_ADDON)
  execFileSync('cc', ['-shared', '-fPIC', `-DABI=${OTHER.abi}`, '-o', file, source])
}

/** Node's own error loading `file`. */
function loadError(file: string): Error {
  try {
    process.dlopen({ exports: {} }, file)
  } catch (err) {
    return err as Error
  }
  throw new Error(`${file} loaded`)
}

/** A folder holding Node.js headers (include/node/node_version.h, the lines node-gyp and the check read) of `version`. */
function headersFolder(version: string, abi: string): string {
  const dir = tempDir()
  const [major, minor, patch] = version.split('.')
  mkdirSync(join(dir, 'include', 'node'), { recursive: true })
  writeFileSync(
    join(dir, 'include', 'node', 'node_version.h'),
    [
      `#define NODE_MAJOR_VERSION ${major}`,
      `#define NODE_MINOR_VERSION ${minor}`,
      `#define NODE_PATCH_VERSION ${patch}`,
      '#ifdef NODE_EMBEDDER_MODULE_VERSION',
      '#define NODE_MODULE_VERSION NODE_EMBEDDER_MODULE_VERSION',
      '#else',
      `#define NODE_MODULE_VERSION ${abi}`,
      '#endif',
      '',
    ].join('\n'),
  )
  return dir
}

const OTHER_VERSION = `${OTHER.node}.3.1`
const BUILT_AGAINST_OTHER =
  `better-sqlite3 was built for Node.js ${OTHER.node} (NODE_MODULE_VERSION ${OTHER.abi}), but this is Node.js ` +
  `${process.versions.node} (NODE_MODULE_VERSION ${process.versions.modules}): `

const EXPECTED =
  `better-sqlite3 was built for Node.js ${OTHER.node} (NODE_MODULE_VERSION ${OTHER.abi}), but this is Node.js ` +
  `${process.versions.node} (NODE_MODULE_VERSION ${process.versions.modules}): run \`npm rebuild better-sqlite3\` ` +
  'with this Node.js, or run plantstore with the Node.js that installed it'

describe('a native module built for another Node.js', () => {
  let dir: string
  let addon: string
  before(() => {
    dir = tempDir()
    // A copy of the project whose better-sqlite3 is the one built for another Node.js.
    cpSync(join(REPO_ROOT, 'src'), join(dir, 'src'), { recursive: true })
    cpSync(join(REPO_ROOT, 'package.json'), join(dir, 'package.json'))
    mkdirSync(join(dir, 'node_modules'))
    for (const entry of readdirSync(join(REPO_ROOT, 'node_modules'))) {
      if (entry !== 'better-sqlite3')
        symlinkSync(join(REPO_ROOT, 'node_modules', entry), join(dir, 'node_modules', entry))
    }
    const driver = join(dir, 'node_modules', 'better-sqlite3')
    for (const entry of ['package.json', 'lib']) {
      cpSync(join(REPO_ROOT, 'node_modules', 'better-sqlite3', entry), join(driver, entry), { recursive: true })
    }
    mkdirSync(join(driver, 'build', 'Release'), { recursive: true })
    addon = join(driver, 'build', 'Release', 'better_sqlite3.node')
    buildWrongAddon(addon)
  })

  test('is named with both Node.js versions and ABIs and the rebuild command, from Node’s own error', () => {
    const err = loadError(addon)
    assert.match(err.message, /was compiled against a different Node\.js version/, 'Node’s error, as loading gives it')
    // No nodedir: the machine's npm config may set one (CI's does, to Node 20's headers), which the next test covers.
    const noNodedir = (): NodeContext => ({
      node: process.versions.node,
      nodedir: undefined,
      prefix: dirname(dirname(process.execPath)),
    })
    assert.equal(wrongNodeMessage(err, noNodedir), EXPECTED)
  })

  test('names npm’s nodedir holding another Node’s headers and rebuilds against this Node’s own, from its prefix', () => {
    const context: NodeContext = {
      node: process.versions.node,
      nodedir: headersFolder(OTHER_VERSION, OTHER.abi),
      prefix: headersFolder(process.versions.node, process.versions.modules),
    }
    assert.equal(
      wrongNodeMessage(loadError(addon), () => context),
      BUILT_AGAINST_OTHER +
        `npm's nodedir (${context.nodedir}) holds the headers of Node.js ${OTHER_VERSION} (NODE_MODULE_VERSION ` +
        `${OTHER.abi}), which a plain \`npm rebuild\` would build for again: run ` +
        `\`npm_config_nodedir=${context.prefix} npm rebuild better-sqlite3\` with this Node.js, or run plantstore ` +
        'with the Node.js that installed it',
    )
  })

  test('says to drop npm’s nodedir when this Node’s prefix holds no headers of its own', () => {
    const context: NodeContext = {
      node: process.versions.node,
      nodedir: headersFolder(OTHER_VERSION, OTHER.abi),
      prefix: tempDir(),
    }
    assert.equal(
      wrongNodeMessage(loadError(addon), () => context),
      BUILT_AGAINST_OTHER +
        `npm's nodedir (${context.nodedir}) holds the headers of Node.js ${OTHER_VERSION} (NODE_MODULE_VERSION ` +
        `${OTHER.abi}), which a plain \`npm rebuild\` would build for again: drop that setting (\`npm config ` +
        'delete nodedir`, or unset npm_config_nodedir), then run `npm rebuild better-sqlite3` with this Node.js ' +
        '(node-gyp fetches its headers), or run plantstore with the Node.js that installed it',
    )
  })

  test('keeps the plain rebuild when npm’s nodedir holds this Node’s headers, or none', () => {
    const prefix = tempDir()
    for (const nodedir of [headersFolder(process.versions.node, process.versions.modules), tempDir(), undefined])
      assert.equal(
        wrongNodeMessage(loadError(addon), () => ({ node: process.versions.node, nodedir, prefix })),
        EXPECTED,
      )
  })

  test('is no answer to other errors', () => {
    assert.equal(wrongNodeMessage(new Error('SQLITE_CANTOPEN: unable to open database file')), undefined)
  })

  test('stops a command with that one line instead of a database error, naming the nodedir of npm’s user configuration', () => {
    const nodedir = headersFolder(OTHER_VERSION, OTHER.abi)
    const home = tempDir()
    writeFileSync(join(home, '.npmrc'), `nodedir=${nodedir}\n`)
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home }
    for (const name of Object.keys(env)) if (/^npm_config_/i.test(name)) delete env[name]
    const main = join(dir, 'src', 'cli', 'main.ts')
    const database = `sqlite:${join(tempDir(), 'store.db')}`
    const run = () =>
      execFileSync(process.execPath, ['--import', 'tsx', main, 'tokens', 'list', '--database', database], {
        cwd: dir,
        env,
        stdio: 'pipe',
        encoding: 'utf8',
      })
    let stderr = ''
    assert.throws(run, (err: { status: number; stderr: string }) => {
      assert.equal(err.status, 1)
      stderr = err.stderr
      return true
    })
    const prefix = dirname(dirname(process.execPath))
    // This Node.js's own headers are under its prefix when it was installed with them (official builds are).
    const fix = new RegExp(
      `: (run \`npm_config_nodedir=${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} npm rebuild better-sqlite3\`|drop that setting \\(.*\\), then run ` +
        '`npm rebuild better-sqlite3`)',
    )
    assert.ok(
      stderr.startsWith(
        `plantstore: ${BUILT_AGAINST_OTHER}npm's nodedir (${nodedir}) holds the headers of Node.js ${OTHER_VERSION}`,
      ),
      stderr,
    )
    assert.match(stderr, fix)
    assert.equal(stderr.split('\n').length, 2, 'one line')
  })
})
