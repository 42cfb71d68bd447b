import { Type, type Static } from '@sinclair/typebox'
import { Int64 } from './int64.js'
import { Text } from './text.js'

export const NAME_MAX = 200
export const TAG_MAX = 100

const name = Text({ minLength: 1, maxLength: NAME_MAX, description: 'The name of the plant' })
const tag = Text({
  minLength: 1,
  maxLength: TAG_MAX,
  description: 'Tag that specifies the type of the plant',
})
const id = Int64({ description: 'Identification number of the plant, unique within the account' })

/** Plant: the shape create and list answer with (no id). */
export const Plant = Type.Object(
  { name, tag: Type.Optional(tag) },
  { $id: 'Plant', title: 'Plant', additionalProperties: false, examples: [{ name: 'Monstera', tag: 'tropical' }] },
)
export type Plant = Static<typeof Plant>

/** NewPlant: what a client sends to create a plant; the id is the caller's. */
export const NewPlant = Type.Object(
  { id, name, tag: Type.Optional(tag) },
  {
    $id: 'NewPlant',
    title: 'NewPlant',
    additionalProperties: false,
    examples: [{ id: 1, name: 'Monstera', tag: 'tropical' }],
  },
)
export type NewPlant = Static<typeof NewPlant>

/** A list item when `fields` asks for it: Plant plus, optionally, the id. */
export const PlantItem = Type.Object(
  { id: Type.Optional(id), name, tag: Type.Optional(tag) },
  { title: 'PlantListItem', additionalProperties: false },
)
export type PlantItem = Static<typeof PlantItem>
