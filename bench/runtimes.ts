/**
 * What the services and plain handlers run on: the harness's node (the first on PATH) and each `--node PATH`
 * (bench/README.md). better-sqlite3 is a native module built for one Node ABI: for a binary of another, the harness
 * builds a copy against that binary's headers, cached in node_modules/.cache/plantstore-bench/, and runs the service
 * from a folder of its own: a copy of dist/ (Node resolves packages from a module's real path; ES modules ignore
 * NODE_PATH) beside a node_modules of links to the project's packages, better-sqlite3 the copy. The plain handler,
 * as a user would write it by hand, runs on postgres.js as published, without the patch of the service's install.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs'
import { symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { run } from './machine.js'
import { compileScript, REPO_DIR, SERVICE_MAIN, type Runtime, type ServerContext } from './servers.js'

const MODULES = path.join(REPO_DIR, 'node_modules')

/** better-sqlite3 built for `node`'s ABI: from the cache, else built now (a minute or two) and cached. */
async function betterSqliteFor(node: string, version: string, abi: string, log: (line: string) => void) {
  const own = path.join(MODULES, 'better-sqlite3')
  const moduleVersion = (JSON.parse(readFileSync(path.join(own, 'package.json'), 'utf8')) as { version: string })
    .version
  const cached = path.join(MODULES, '.cache', 'plantstore-bench', `better-sqlite3-${moduleVersion}-abi${abi}`)
  const built = path.join(cached, 'node_modules', 'better-sqlite3')
  if (existsSync(path.join(built, 'build', 'Release', 'better_sqlite3.node'))) return built
  const nodedir = path.dirname(path.dirname(realpathSync(node)))
  if (!existsSync(path.join(nodedir, 'include', 'node', 'node_api.h'))) {
    throw new Error(
      `--node ${node}: better-sqlite3 must be built for Node ${version}, and no headers are at ${nodedir}/include/node; ` +
        "use a distribution that ships them (an official tarball, or the npm registry's node package)",
    )
  }
  log(`building better-sqlite3 ${moduleVersion} for Node ${version} (a minute or two; kept in ${cached})`)
  const staging = `${cached}.${process.pid}`
  rmSync(staging, { recursive: true, force: true })
  mkdirSync(path.join(staging, 'node_modules'), { recursive: true })
  writeFileSync(path.join(staging, 'package.json'), '{ "private": true }\n')
  const filter = (source: string) => source !== path.join(own, 'build')
  cpSync(own, path.join(staging, 'node_modules', 'better-sqlite3'), { recursive: true, filter })
  try {
    // Its install script tries prebuild-install first, which would look for a download; straight to node-gyp.
    const PATH = `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}`
    const env = { ...process.env, PATH, npm_config_nodedir: nodedir, npm_config_build_from_source: 'true' }
    await run('npm', ['rebuild', 'better-sqlite3'], { cwd: staging, env })
  } catch (err) {
    rmSync(staging, { recursive: true, force: true })
    const { stderr, message } = err as { stderr?: string; message: string }
    throw new Error(`building better-sqlite3 for Node ${version} failed: ${stderr?.trim() || message}`)
  }
  rmSync(cached, { recursive: true, force: true })
  renameSync(staging, cached)
  return built
}

/** The folder `node`'s servers run from (its dist/ entry point returned); the project's own for the harness's ABI. */
async function runtimeFolder(node: string, version: string, abi: string, dir: string, log: (line: string) => void) {
  mkdirSync(dir)
  if (abi === process.versions.modules) {
    symlinkSync(MODULES, path.join(dir, 'node_modules'))
    return SERVICE_MAIN
  }
  linkModules(dir, MODULES, { 'better-sqlite3': await betterSqliteFor(node, version, abi, log) })
  // package.json too: it makes dist/ ES modules, and the service reads its version from it.
  cpSync(path.join(REPO_DIR, 'package.json'), path.join(dir, 'package.json'))
  cpSync(path.join(REPO_DIR, 'dist'), path.join(dir, 'dist'), { recursive: true })
  return path.join(dir, 'dist', 'cli', 'main.js')
}

/** `folder`/node_modules: links to the packages in `modules` (their real folders), or to those `replaced` gives. */
function linkModules(folder: string, modules: string, replaced: Record<string, string>): void {
  mkdirSync(path.join(folder, 'node_modules'), { recursive: true })
  for (const entry of readdirSync(modules).filter((name) => !name.startsWith('.')))
    symlinkSync(replaced[entry] ?? realpathSync(path.join(modules, entry)), path.join(folder, 'node_modules', entry))
}

/** The plain handler's folder in `dir`: `dir`'s packages, but postgres.js as published (scripts/patch-postgres.js). */
async function plainFolder(dir: string): Promise<string> {
  const published = path.join(dir, 'postgres-as-published')
  await run(process.execPath, [path.join(REPO_DIR, 'scripts', 'patch-postgres.js'), '--published', published])
  linkModules(path.join(dir, 'plain'), path.join(dir, 'node_modules'), { postgres: published })
  return compileScript('plain-server', path.join(dir, 'plain'))
}

/** The harness's node, then each of `others`, each another version (a folder of its own is named by it). */
export async function prepareRuntimes(others: string[], context: ServerContext, log: (line: string) => void) {
  const binaries = [process.execPath, ...others.map((node) => path.resolve(node))]
  const runtimes: Runtime[] = []
  for (const node of binaries) {
    const script = 'process.version + " " + process.versions.modules'
    const [version = '', abi = ''] = (await run(node, ['-p', script])).stdout.trim().split(' ')
    const dir = path.join(context.tmpDir, `node-${version.split('.')[0]}`)
    if (existsSync(dir))
      throw new Error(`--node: Node ${version} is of a major version already run (labels would clash)`)
    const serviceMain = await runtimeFolder(node, version, abi, dir, log)
    const tag = binaries.length === 1 ? '' : ` on Node ${version.slice(1).split('.')[0]}`
    runtimes.push({ node, version, tag, serviceMain, plainServer: await plainFolder(dir) })
  }
  return runtimes
}
