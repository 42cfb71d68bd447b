/**
 * `next` applied to a value now, or once a promise of it resolves. The request path passes values that are
 * usually at hand (a cached token, an in-process counter) this way, so that the common case makes no promise and
 * waits for no turn of the event loop.
 */
export function andThen<T, U>(value: T | Promise<T>, next: (value: T) => U | Promise<U>): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value)
}

/**
 * `run`'s value, or `recover`'s for its failure, whether `run` throws at once or its promise rejects: one place for
 * the two ways a step that is usually at hand can fail.
 */
export function recovering<T>(run: () => T | Promise<T>, recover: (err: unknown) => T | Promise<T>): T | Promise<T> {
  let value: T | Promise<T>
  try {
    value = run()
  } catch (err) {
    return recover(err)
  }
  return value instanceof Promise ? value.catch(recover) : value
}
