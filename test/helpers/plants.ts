import type { PageRequest, PlantStore, StoredPlant } from '../../src/storage/index.js'
import { parseExact } from './json.js'

/** One page of an account's plants read back as stored rows: every field asked for, the JSON parsed exactly. */
export async function listPlants(
  plants: PlantStore,
  accountId: number,
  request: Omit<PageRequest, 'fields'>,
): Promise<StoredPlant[]> {
  const page = await plants.list(accountId, { ...request, fields: { id: true, tag: true } })
  const items = parseExact(page.json) as Array<{ id: bigint; name: string; tag?: string }>
  return items.map(({ id, name, tag }) => ({ id, name, tag: tag ?? null }))
}
