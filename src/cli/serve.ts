import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { CONFIG_KEYS, settingOf, type ConfigKey } from '../config.js'
import { serve } from '../server.js'
import { commandConfig } from './settings.js'
import { startedByPackageManager, stopWithParent } from './stop-with-parent.js'
import { runPrimary } from './workers.js'

// The settings with a flag, by flag name without its dashes (`port`: PORT), from the configuration schema.
const FLAGS = new Map<string, ConfigKey>(
  CONFIG_KEYS.flatMap((key) => {
    const flag = settingOf(key).flag
    return flag === undefined ? [] : [[flag.replace(/^--/, ''), key]]
  }),
)

/** `plantstore serve`. */
export async function serveCommand(args: string[]): Promise<void> {
  const options = Object.fromEntries([...FLAGS.keys()].map((flag) => [flag, { type: 'string' as const }]))
  const { values } = parseArgs({ args, options, strict: true })
  const overrides = Object.fromEntries(
    [...FLAGS].map(([flag, key]) => [key, values[flag] as string | undefined]),
  ) as Partial<Record<ConfigKey, string>>
  const config = commandConfig(overrides)
  // Workers are stopped by their primary, which does the watching.
  if (cluster.isPrimary && startedByPackageManager(process.env)) stopWithParent()
  if (config.WORKERS > 1 && cluster.isPrimary) await runPrimary(config)
  else await serve(config)
}
