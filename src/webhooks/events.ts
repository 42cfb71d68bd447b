import { randomBytes } from 'node:crypto'
import type { OutboxEvent } from '../storage/index.js'

/** The events a subscription can receive. */
export const EVENT_TYPES = ['plant.created', 'plant.deleted'] as const
export type EventType = (typeof EVENT_TYPES)[number]

// Random bytes for event ids, drawn a batch at a time as randomUUID does: randomBytes(16) on every event was a call
// into OpenSSL each time, 2.5% of a POST's time in a CPU profile of the service under load here.
const ID_BYTES = 16
const BATCH_BYTES = ID_BYTES * 128
let batch = Buffer.alloc(0)
let taken = 0

function idBytes(): Buffer {
  if (taken + ID_BYTES > batch.length) [batch, taken] = [randomBytes(BATCH_BYTES), 0]
  return batch.subarray(taken, (taken += ID_BYTES))
}

/** A new event id (`webhook-id`): the same on every attempt, so receivers can drop duplicates. */
function newEventId(): string {
  return 'msg_' + idBytes().toString('base64url')
}

/** A new subscription id, safe to print and log. */
export function newSubscriptionId(): string {
  return 'whk_' + randomBytes(8).toString('hex')
}

/** A new signing secret in the Standard Webhooks form: `whsec_` and 32 random bytes in base64. */
export function newSigningSecret(): string {
  return 'whsec_' + randomBytes(32).toString('base64')
}

/** The body of `plant.created`: the contract's NewPlant `{id, name, tag?}`, the int64 id written exactly. */
function createdBody(plant: { id: bigint; name: string; tag: string | null }): string {
  const tag = plant.tag === null ? '' : `,"tag":${JSON.stringify(plant.tag)}`
  return `{"id":${plant.id},"name":${JSON.stringify(plant.name)}${tag}}`
}

/** The body of `plant.deleted`: `{id}`. */
function deletedBody(id: bigint): string {
  return `{"id":${id}}`
}

/** The plant.created event of a new plant, for the outbox; storage writes it only if the plant was created. */
export function plantCreated(plant: { id: bigint; name: string; tag: string | null }): OutboxEvent {
  return { id: newEventId(), type: 'plant.created', body: createdBody(plant) }
}

/** The plant.deleted event of a plant, for the outbox; storage writes it only if the plant was deleted. */
export function plantDeleted(id: bigint): OutboxEvent {
  return { id: newEventId(), type: 'plant.deleted', body: deletedBody(id) }
}
