import assert from 'node:assert/strict'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises'
import { describe, test } from 'node:test'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { registerPipeliningLimit } from '../../src/plugins/pipelining.js'
import { registerRequestGates } from '../../src/plugins/request-gates.js'
import { rawExchange, statusCodes } from '../helpers/raw-http.js'

/**
 * A server with only the pipelining limit and one route, `/page/:n`, that answers `{n}` (after `first` has run, for
 * page 1) and records each page it made, in the order they were made.
 */
async function server(first: (request: FastifyRequest, reply: FastifyReply) => Promise<void>) {
  const app = Fastify()
  registerRequestGates(app, [registerPipeliningLimit(app)])
  const made: string[] = []
  let received = 0
  app.addHook('onRequest', (_request, _reply, done) => {
    received++
    done()
  })
  app.get('/page/:n', async (request, reply) => {
    const { n } = request.params as { n: string }
    if (n === '1') await first(request, reply)
    made.push(n)
    return { n }
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, made, received: () => received, port: (app.server.address() as AddressInfo).port }
}

const pages = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `GET /page/${from + i} HTTP/1.1\r\nHost: x\r\n\r\n`).join('')

describe('pipelining limit', () => {
  test('runs no handler for the requests still waiting on a connection that closed before their turn', async () => {
    // Page 1's answer never leaves: its handler closes the connection first, as the write stall timeout does, once
    // every pipelined request has arrived and waits on the answer before it.
    let answerClosed: Promise<unknown> | undefined
    const { app, made, received, port } = await server(async (request, reply) => {
      for (let turns = 0; received() < 8; turns++) {
        assert.ok(turns < 100_000, `${received()} of 8 pipelined requests arrived`)
        await nextTurn()
      }
      await nextTurn()
      answerClosed = once(reply.raw, 'close')
      request.raw.socket.resetAndDestroy()
    })
    try {
      await rawExchange(port, [pages(1, 8)])
      // Node 24 and later close every waiting answer with the connection, Node 20 and 22 only the one being written:
      // either way no waiting request may make an answer that has no one to go to. Page 2 is let through or not by a
      // listener on page 1's answer, run when it closes: released, its handler would have run by the next turn.
      await answerClosed
      await nextTurn()
      assert.equal(received(), 8, 'every pipelined request arrived')
      assert.deepEqual(made, ['1'])
    } finally {
      await app.close()
    }
  })

  test('answers the pipelined requests of a connection that stays open, in order, each made after the one before left', async () => {
    // Page 1 is the slowest: were the handlers run at once, page 2 would be made before page 1 had left.
    const { app, made, port } = await server(() => sleep(50))
    try {
      const last = `GET /page/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`
      const { text } = await rawExchange(port, [pages(1, 2) + last])
      assert.deepEqual(statusCodes(text), [200, 200, 200])
      assert.deepEqual(made, ['1', '2', '3'])
      assert.deepEqual(
        [...text.matchAll(/\{"n":"(\d)"\}/g)].map((match) => match[1]),
        ['1', '2', '3'],
      )
    } finally {
      await app.close()
    }
  })
})
