import { test, type TestOptions } from 'node:test'

/** `run` started on the first call only; every call gets its one promise, so a failure reaches every caller. */
export function once<T>(run: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined
  return () => (result ??= run())
}

type Body = () => Promise<void>

/**
 * A test whose body later tests build on (a model it fills, a load it sends): they await the returned function, which
 * runs the body if its own test has not. So each test runs alone (--test-name-pattern) as well as in its file, and no
 * body runs twice.
 */
export function testOnce(name: string, body: Body): Body
export function testOnce(name: string, options: TestOptions, body: Body): Body
export function testOnce(name: string, ...args: [Body] | [TestOptions, Body]): Body {
  const [options, body] = args.length === 1 ? [{}, args[0]] : args
  const run = once(body)
  test(name, options, run)
  return run
}
