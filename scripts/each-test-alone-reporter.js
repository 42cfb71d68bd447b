/**
 * A node:test reporter for scripts/each-test-alone.ts: one JSON line per finished test or suite, in the order the
 * runner reports them (children before their parent), with its nesting, so the script can rebuild the tree. Plain
 * JavaScript: the runner loads reporters before `--import tsx` can teach it TypeScript.
 */
export default async function* reporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const { name, nesting, details, skip, todo } = event.data
    const failed = event.type === 'test:fail'
    const reason = skip ?? todo
    yield (
      JSON.stringify({
        name,
        nesting,
        suite: details?.type === 'suite',
        outcome: failed ? 'fail' : skip ? 'skip' : todo ? 'todo' : 'pass',
        ...(typeof reason === 'string' && { reason }),
        ...(failed && { error: String(details?.error?.cause?.message ?? details?.error?.message ?? '') }),
      }) + '\n'
    )
  }
}
