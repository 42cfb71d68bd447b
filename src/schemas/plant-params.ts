import { Type, type Static } from '@sinclair/typebox'
import { Int64 } from './int64.js'

const plantParams = (description: string) =>
  Type.Object({ id: Int64({ description }) }, { additionalProperties: false })

/** Path parameters of DELETE /plants/{id}. */
export const PlantParams = plantParams('Id of the plant to delete')
export type PlantParams = Static<typeof PlantParams>

/** Path parameters of GET /plants/{id}: the same rules, described for a read. */
export const GetPlantParams = plantParams('Id of the plant to return')
