import { readFileSync } from 'node:fs'

/**
 * The node flags the service runs with in production: those of bin/plantstore.js's `#!/usr/bin/env -S node …`, for
 * those that start it with a node of their choosing (the benchmark, the suite) instead of through its first line.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = (() => {
  const shebang = readFileSync(new URL('../bin/plantstore.js', import.meta.url), 'utf8').split('\n')[0] ?? ''
  const flags = /^#!\/usr\/bin\/env -S node(.*)$/.exec(shebang)?.[1]
  if (flags === undefined) throw new Error(`bin/plantstore.js: no "#!/usr/bin/env -S node" line: ${shebang}`)
  return flags.trim().split(/\s+/).filter(Boolean)
})()
