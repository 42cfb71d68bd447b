import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { bearer, buildTestApp, type TestApp } from '../helpers/app.js'
import { backends } from '../helpers/backends.js'
import { serialOrder, type RacedOp } from '../helpers/serial-order.js'

describe('the serial-order check', () => {
  test('explains a history some order produces', () => {
    const ops: RacedOp[] = [
      { kind: 'delete', status: 204 },
      { kind: 'create', name: 'a', status: 200 },
      { kind: 'create', name: 'b', status: 409 },
    ]
    assert.deepEqual(serialOrder(ops, null, null), [ops[1], ops[2], ops[0]])
  })

  test('rejects two different names both stored, a delete of nothing that succeeded, and a wrong final state', () => {
    const twoWinners: RacedOp[] = [
      { kind: 'create', name: 'a', status: 200 },
      { kind: 'create', name: 'b', status: 200 },
    ]
    assert.equal(serialOrder(twoWinners, null, 'b'), undefined)
    assert.equal(serialOrder([{ kind: 'delete', status: 204 }], null, null), undefined)
    assert.equal(serialOrder([{ kind: 'create', name: 'a', status: 200 }], null, null), undefined)
  })
})

// Per run: up to 6 ids, each with up to 8 creates (of two names) and deletes sent all at once.
const RUNS = 25
const opsOnOneId = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('create' as const), name: fc.constantFrom('a', 'b') }),
    fc.record({ kind: fc.constant('delete' as const) }),
  ),
  { minLength: 2, maxLength: 8 },
)

for (const backend of backends) {
  describe(`racing creates and deletes of the same ids (${backend.name})`, () => {
    let t: TestApp
    let headers: { authorization: string }
    before(async () => {
      t = await buildTestApp(backend)
      headers = bearer(await t.token('alice'))
    })
    after(() => t.close())

    const send = async (id: number, op: { kind: 'create'; name: string } | { kind: 'delete' }): Promise<RacedOp> => {
      const res =
        op.kind === 'create'
          ? await t.app.inject({
              method: 'POST',
              url: '/plants',
              headers: { ...headers, 'content-type': 'application/json' },
              payload: JSON.stringify({ id, name: op.name }),
            })
          : await t.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers })
      return { ...op, status: res.statusCode }
    }

    const stored = async (): Promise<Map<number, string>> => {
      const res = await t.app.inject({ method: 'GET', url: '/plants?fields=id,name&limit=1000', headers })
      return new Map((res.json() as Array<{ id: number; name: string }>).map((plant) => [plant.id, plant.name]))
    }

    test('end in a state, and with answers, that some serial order of the requests explains', async () => {
      let nextId = 1
      await fc.assert(
        fc.asyncProperty(fc.array(opsOnOneId, { minLength: 1, maxLength: 6 }), async (perId) => {
          // Fresh ids per run, so each starts absent.
          const ids = perId.map(() => nextId++)
          const seen = await Promise.all(perId.map((ops, i) => Promise.all(ops.map((op) => send(ids[i]!, op)))))
          const storedNow = await stored()
          seen.forEach((ops, i) => {
            const final = storedNow.get(ids[i]!) ?? null
            const order = serialOrder(ops, null, final)
            assert.ok(
              order !== undefined,
              `id ${ids[i]}: ${JSON.stringify(ops)} ending in ${final} has no serial order`,
            )
          })
        }),
        { numRuns: RUNS },
      )
    })
  })
}
