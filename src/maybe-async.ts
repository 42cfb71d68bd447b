/**
 * `next` applied to a value now, or once a promise of it resolves. The request path passes values that are
 * usually at hand (a cached token, an in-process counter) this way, so that the common case makes no promise and
 * waits for no turn of the event loop.
 */
export function andThen<T, U>(value: T | Promise<T>, next: (value: T) => U | Promise<U>): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value)
}
