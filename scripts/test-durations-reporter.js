/**
 * A node:test reporter for scripts/test.js: at the end of a run, one JSON object of how long each test file's tests
 * took, in milliseconds, by the file's absolute path. The runner keeps them and starts the longest files first next
 * time. Plain JavaScript: the runner loads reporters before `--import tsx` can teach it TypeScript.
 */
export default async function* reporter(source) {
  const durations = {}
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const { file, nesting, details } = event.data
    if (nesting !== 0 || typeof file !== 'string') continue
    durations[file] = (durations[file] ?? 0) + (details?.duration_ms ?? 0)
  }
  yield JSON.stringify(durations) + '\n'
}
