import { Type, type Static } from '@sinclair/typebox'
import { Int64 } from './int64.js'

/** Path parameters of DELETE /plants/{id}. */
export const PlantParams = Type.Object(
  { id: Int64({ description: 'Id of the plant to delete' }) },
  { additionalProperties: false },
)
export type PlantParams = Static<typeof PlantParams>
