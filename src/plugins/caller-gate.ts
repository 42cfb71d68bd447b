import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Authenticator } from '../auth/bearer.js'
import type { Caller } from '../auth/caller.js'
import { ApiError } from '../errors.js'
import type { Admission, AuthThrottle, CallerLimits } from '../limits/rate-limits.js'
import { limitField, policyField } from '../limits/ratelimit-fields.js'
import { andThen, recovering } from '../maybe-async.js'

const UNLIMITED: Admission = { budgets: [] }

/** What the gate needs: who is calling, and the limits on them (none when not given). */
export interface CallerGateOptions {
  authenticator: Authenticator
  throttle?: AuthThrottle | undefined
  limits?: CallerLimits | undefined
}

/**
 * The one onRequest hook between a request for a route that declares a `scope` and its handler, in this order:
 * 1. the failed-authentication throttle of the client's address (429), before the token is looked at;
 * 2. authentication (401; a refused token, but not a missing one, counts toward 1);
 * 3. the per-token and then the per-account rate limit (429), with the RateLimit-Policy and RateLimit fields of
 *    the policies it was counted against on every answer from here on;
 * 4. the scope (403: counted by 3 and carrying its headers).
 * All of it before the body is read, so that unauthenticated clients cannot make us parse anything. A request whose
 * token and counts are at hand (the cache, an in-process counter) waits for nothing: no promise is made.
 */
export function registerCallerGate(app: FastifyInstance, options: CallerGateOptions): void {
  const { authenticator, throttle, limits } = options
  const policies = policyField(limits?.policies ?? [])
  const refused = (request: FastifyRequest, err: unknown): Promise<never> | never => {
    if (throttle === undefined || !(err instanceof ApiError) || err.kind !== 'invalidToken') throw err
    return throttle.refused(request).then(() => {
      throw err
    })
  }
  const authenticate = (request: FastifyRequest): Caller | Promise<Caller> =>
    recovering(
      () => authenticator.authenticate(request),
      (err) => refused(request, err),
    )
  const enter = (request: FastifyRequest, reply: FastifyReply, caller: Caller): void | Promise<void> => {
    request.caller = caller
    const scope = request.routeOptions.config.scope!
    const admitted = (admission: Admission): void => {
      const { budgets, refusal } = admission
      if (budgets.length > 0) {
        reply.header('ratelimit-policy', policies)
        reply.header('ratelimit', limitField(budgets))
      }
      if (refusal !== undefined) throw refusal
      const lacking = authenticator.lacking(caller, scope)
      if (lacking !== undefined) throw lacking
    }
    return limits === undefined ? admitted(UNLIMITED) : andThen(limits.admit(caller, request), admitted)
  }
  app.addHook('onRequest', (request, reply, done) => {
    if (request.routeOptions.config.scope === undefined) return done()
    let pending: void | Promise<void>
    try {
      const gate = throttle?.check(request)
      const caller = gate === undefined ? authenticate(request) : gate.then(() => authenticate(request))
      pending = andThen(caller, (known) => enter(request, reply, known))
    } catch (err) {
      return done(err as Error)
    }
    if (pending instanceof Promise) pending.then(() => done(), done)
    else done()
  })
}
