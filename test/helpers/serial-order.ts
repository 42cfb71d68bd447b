/** One request on one plant id and the status it got: POST with a name, or DELETE. */
export type RacedOp = { kind: 'create'; name: string; status: number } | { kind: 'delete'; status: number }

/** What the API answers `op` in `state` (the stored name, or null), and the state after it. */
function apply(op: RacedOp, state: string | null): { status: number; state: string | null } {
  if (op.kind === 'delete') return state === null ? { status: 404, state } : { status: 204, state: null }
  if (state === null) return { status: 200, state: op.name }
  return { status: state === op.name ? 200 : 409, state }
}

/**
 * An order of `ops`, all running at once on one id that started in state `initial`, in which each op gets the
 * status it got and the id ends in `final`; undefined when no serial order explains what was seen.
 */
export function serialOrder(ops: RacedOp[], initial: string | null, final: string | null): RacedOp[] | undefined {
  const dead = new Set<string>()
  const search = (left: number[], state: string | null): RacedOp[] | undefined => {
    if (left.length === 0) return state === final ? [] : undefined
    const key = `${left.join(',')}|${state}`
    if (dead.has(key)) return undefined
    for (const index of left) {
      const op = ops[index]!
      const next = apply(op, state)
      if (next.status !== op.status) continue
      const rest = search(
        left.filter((other) => other !== index),
        next.state,
      )
      if (rest !== undefined) return [op, ...rest]
    }
    dead.add(key)
    return undefined
  }
  return search(
    ops.map((_, index) => index),
    initial,
  )
}
