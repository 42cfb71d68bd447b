import { LIST_LIMIT } from './scenarios.js'

/** The plant the seeder stores under `id`; the Lua scripts POST the same shape (bench/lua/common.lua). */
export function seedPlant(id: number): { id: number; name: string; tag: string } {
  return { id, name: `bench plant ${id}`, tag: 'bench' }
}

/**
 * The first page of the seeded account as the service sends it (ascending id; Plant is {name, tag}); the
 * reference server sends these very bytes, and the harness checks the service does too.
 */
export function listBody(): string {
  const plants = Array.from({ length: LIST_LIMIT }, (_, i) => seedPlant(i + 1))
  return JSON.stringify(plants.map(({ name, tag }) => ({ name, tag })))
}
