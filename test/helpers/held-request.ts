import { randomUUID } from 'node:crypto'
import { request } from 'node:http'
import type { ServerProcess } from './server-process.js'

/** A POST whose body is held back half-way, so it is in flight until sendRest() is called. */
export function heldPost(server: ServerProcess, token: string, id: number) {
  const body = JSON.stringify({ id, name: 'In flight' })
  const requestId = randomUUID()
  const req = request(`${server.baseUrl}/plants`, {
    method: 'POST',
    agent: false,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'x-request-id': requestId,
    },
  })
  const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.once('error', reject)
    req.once('response', (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.once('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
  })
  req.write(body.slice(0, 5))
  return {
    response,
    /** Resolves once the server has logged the request's arrival (at LOG_LEVEL debug). */
    arrived: () => server.waitForStdout(new RegExp(`"reqId":"${requestId}".*"request received"`)),
    sendRest: () => req.end(body.slice(5)),
  }
}
