import { CONFIG_KEYS } from './config.js'

const PREFIX = 'PLANTSTORE_'
const KNOWN: ReadonlySet<string> = new Set(CONFIG_KEYS)
/** The suite's and the benchmark's own switches (docs/reliability.md): read by them, never by the service. */
const PROJECT_PREFIXES = ['PLANTSTORE_TEST_', 'PLANTSTORE_BENCH_']
/**
 * What Kubernetes puts in every pod for a Service named plantstore (docker links did the same): its address, in
 * `PLANTSTORE_SERVICE_HOST`, `PLANTSTORE_SERVICE_PORT*`, `PLANTSTORE_PORT_8080_TCP*`, and `PLANTSTORE_PORT` as a URL.
 */
const SERVICE_LINK =
  /^PLANTSTORE_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_[0-9]+_(TCP|UDP|SCTP)(_ADDR|_PORT|_PROTO)?)$/
const SERVICE_LINK_URL = /^(tcp|udp|sctp):\/\//
/**
 * An unprefixed variable this close to a setting of as many letters or more is taken for a misspelling of it.
 * Shorter settings (HOST, PORT) are as close to variables every shell has (HOME, PATH) and are left out.
 */
const NEAR = 2
const NEAR_FROM_LENGTH = 8

/** Levenshtein distance: the fewest inserted, deleted or replaced characters that turn `a` into `b`. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const replaced = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, replaced))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The setting `name` most likely meant, compared with and without the prefix; none when nothing is close. */
function closest(name: string): string | undefined {
  const bare = name.startsWith(PREFIX) ? name.slice(PREFIX.length) : name
  let best: { key: string; cost: number } | undefined
  for (const key of CONFIG_KEYS) {
    const cost = Math.min(distance(name, key), distance(bare, key))
    if (best === undefined || cost < best.cost) best = { key, cost }
  }
  return best !== undefined && best.cost <= Math.max(NEAR, Math.floor(best.key.length / 4)) ? best.key : undefined
}

/** A variable the service would be expected to read but does not: prefixed, or one slip away from a setting. */
function stray(name: string, value: string | undefined): boolean {
  if (KNOWN.has(name) || SERVICE_LINK.test(name)) return false
  if (name === `${PREFIX}PORT` && SERVICE_LINK_URL.test(value ?? '')) return false
  if (name.startsWith(PREFIX)) return !PROJECT_PREFIXES.some((prefix) => name.startsWith(prefix))
  return CONFIG_KEYS.some(
    (key) => !key.startsWith(PREFIX) && key.length >= NEAR_FROM_LENGTH && distance(name, key) <= NEAR,
  )
}

/** The variables in `env` that look meant for the service but are no setting of it, each with the setting meant. */
function strays(env: NodeJS.ProcessEnv): Array<{ name: string; meant: string | undefined }> {
  return Object.keys(env)
    .filter((name) => stray(name, env[name]))
    .sort()
    .map((name) => ({ name, meant: closest(name) }))
}

/**
 * One warning line for each variable in `env` that looks meant for the service but is no setting of it, naming the
 * closest setting, so that a misspelt one is not silently left at its default. `except` is left out.
 */
export function unknownSettings(env: NodeJS.ProcessEnv, except?: string): string[] {
  return strays(env)
    .filter(({ name }) => name !== except)
    .map(({ name, meant }) =>
      meant === undefined
        ? `${name}: not a setting (docs/configuration.md lists them)`
        : `${name}: not a setting; did you mean ${meant}?`,
    )
}

/**
 * The variable in `env` taken for a misspelt DATABASE_URL while DATABASE_URL itself is unset (or empty), if any:
 * left at its default, the service would open a new, empty store of its own instead of the one meant.
 */
export function misspeltDatabaseUrl(env: NodeJS.ProcessEnv): string | undefined {
  if (env.DATABASE_URL !== undefined && env.DATABASE_URL !== '') return undefined
  return strays(env).find(({ meant }) => meant === 'DATABASE_URL')?.name
}
