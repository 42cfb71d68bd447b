import { LIST_LIMIT } from './scenarios.js'

/**
 * A plant shop's plants, names of real lengths, some untagged. Plant `id` is entry `id % length` in the seeders
 * (bench/bulk-seed.ts, in JavaScript and in SQL) and the wrk script, which gets the list through the environment:
 * names hold no '"', '\\', '|' or ';' (it writes them into JSON with string.format, and splits the list on them).
 */
export const CATALOGUE: ReadonlyArray<{ name: string; tag?: string }> = [
  { name: "Monstera deliciosa 'Thai Constellation'", tag: 'aroid' },
  { name: 'Snake plant (Dracaena trifasciata)', tag: 'succulent' },
  { name: 'Fiddle-leaf fig', tag: 'tree' },
  { name: "Pothos 'Marble Queen'", tag: 'trailing' },
  { name: 'ZZ plant', tag: 'foliage' },
  { name: 'Boston fern', tag: 'fern' },
  { name: 'Peace lily', tag: 'flowering' },
  { name: 'Aloe vera', tag: 'succulent' },
  { name: 'Echeveria elegans', tag: 'succulent' },
  { name: "Calathea orbifolia 'Prayer Plant'", tag: 'foliage' },
  { name: 'Bird of paradise (Strelitzia reginae)', tag: 'tree' },
  { name: 'Golden barrel cactus', tag: 'cactus' },
  { name: 'Bunny ears cactus (Opuntia microdasys)', tag: 'cactus' },
  { name: 'String of pearls', tag: 'trailing' },
  { name: 'Rubber plant (Ficus elastica)', tag: 'tree' },
  { name: "Philodendron 'Pink Princess'", tag: 'aroid' },
  { name: 'Chinese money plant', tag: 'foliage' },
  { name: 'Spider plant' },
  { name: 'English ivy', tag: 'climber' },
  { name: "Hoya carnosa 'Krimson Queen'", tag: 'climber' },
  { name: 'Sweet basil', tag: 'herb' },
  { name: 'Rosemary', tag: 'herb' },
  { name: 'Lavender (Lavandula angustifolia)', tag: 'herb' },
  { name: 'Moth orchid (Phalaenopsis)', tag: 'orchid' },
  { name: "Anthurium andraeanum 'Red Love'", tag: 'flowering' },
  { name: 'Jade plant', tag: 'succulent' },
  { name: 'Staghorn fern (Platycerium bifurcatum)', tag: 'fern' },
  { name: 'Maidenhair fern', tag: 'fern' },
  { name: 'Venus flytrap', tag: 'carnivorous' },
  { name: 'Olive tree (Olea europaea)', tag: 'tree' },
  { name: 'Kentia palm', tag: 'palm' },
  { name: 'Parlor palm (Chamaedorea elegans)', tag: 'palm' },
  { name: "Alocasia 'Polly'", tag: 'aroid' },
  { name: 'Cast iron plant' },
  { name: 'Tulip bulbs (pack of 10)', tag: 'bulb' },
  { name: "Japanese maple 'Bloodgood'", tag: 'tree' },
  { name: 'Climbing rose', tag: 'climber' },
  { name: 'Tomato seedling', tag: 'vegetable' },
  { name: "Begonia maculata 'Wightii'", tag: 'flowering' },
  { name: 'Air plant (Tillandsia ionantha)', tag: 'bromeliad' },
  { name: 'Dumb cane (Dieffenbachia)' },
]

/** The plant stored under `id`: what the seeder inserts and the Lua scripts POST for it. */
export function seedPlant(id: number): { id: number; name: string; tag?: string } {
  return { id, ...(CATALOGUE[id % CATALOGUE.length] as { name: string; tag?: string }) }
}

/** The page after plant `after` of an account holding plants 1..n (n > after + limit), as the service sends it. */
export function pageBody(after: number, limit = LIST_LIMIT): string {
  const plants = Array.from({ length: limit }, (_, i) => seedPlant(after + i + 1))
  return JSON.stringify(plants.map(({ name, tag }) => (tag === undefined ? { name } : { name, tag })))
}

/** The catalogue for the Lua scripts: "name|tag;name|;..." (PLANTSTORE_BENCH_CATALOGUE). */
export const CATALOGUE_ENV = CATALOGUE.map((entry) => `${entry.name}|${entry.tag ?? ''}`).join(';')
