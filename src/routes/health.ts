import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { errorResponse } from './error-responses.js'
import type { HealthCheck } from '../storage/index.js'

/** GET /healthz (the process serves HTTP) and GET /readyz (it can serve plants: storage answers, not shutting down). */
export const healthRoutes: FastifyPluginAsyncTypebox<{ health: HealthCheck }> = async (app, { health }) => {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getLiveness',
        tags: ['health'],
        summary: 'Liveness check',
        description: 'Answers 200 while the process serves HTTP. No authentication.',
        security: [],
        response: { 200: Type.Object({ status: Type.Literal('ok') }, { examples: [{ status: 'ok' }] }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  )
  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        tags: ['health'],
        summary: 'Readiness check',
        description:
          'Answers 200 when the storage answers and the instance is not shutting down; 503 otherwise, so a load ' +
          'balancer stops sending it traffic. After a write failed because the database could not take it (disk ' +
          'full, read-only, locked), the storage counts as answering only once a probe write commits again. ' +
          'No authentication.',
        security: [],
        response: {
          200: Type.Object({ status: Type.Literal('ready') }, { examples: [{ status: 'ready' }] }),
          503: errorResponse(['unavailable', 'shuttingDown'], 'Not ready.', {
            'Retry-After': Type.Integer({ description: 'Seconds to wait before retrying' }),
          }),
        },
      },
    },
    async () => {
      await health.ping()
      return { status: 'ready' as const }
    },
  )
}
