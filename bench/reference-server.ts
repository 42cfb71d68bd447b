/**
 * The reference server: bare node:http doing the least the service must do per request (route, compare the bearer
 * header, parse or send JSON) with nothing behind it, the practical ceiling of Node here. Compiled alone (node:
 * imports only): `node reference-server.mjs PORT` with PLANTSTORE_BENCH_TOKEN and PLANTSTORE_BENCH_LIST_BODY (the
 * bytes every GET /plants answers: the seeded service's first page).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'

const expectedAuthorization = `Bearer ${process.env.PLANTSTORE_BENCH_TOKEN ?? ''}`
const listBody = Buffer.from(process.env.PLANTSTORE_BENCH_LIST_BODY ?? '[]')
const unauthorized = JSON.stringify({ error: 40101, message: 'a valid bearer token is required' })
const badRequest = JSON.stringify({ error: 40001, message: 'body must be a plant' })
const notFound = JSON.stringify({ error: 40402, message: 'no such route' })

function sendJson(res: ServerResponse, status: number, body: string | Buffer): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  })
  res.end(body)
}

/** Parses the body as the service's contract wants it ({id, name, tag?}) and answers the Plant. */
function createPlant(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => {
    let plant: { id?: unknown; name?: unknown; tag?: unknown }
    try {
      plant = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      return sendJson(res, 400, badRequest)
    }
    if (typeof plant?.id !== 'number' || typeof plant.name !== 'string') return sendJson(res, 400, badRequest)
    sendJson(res, 200, JSON.stringify({ name: plant.name, tag: plant.tag }))
  })
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/'
  if (url === '/healthz') return sendJson(res, 200, '{"status":"ok"}')
  const isList = url === '/plants' || url.startsWith('/plants?')
  const isOne = url.startsWith('/plants/')
  if (!isList && !isOne) return sendJson(res, 404, notFound)
  if (req.headers.authorization !== expectedAuthorization) return sendJson(res, 401, unauthorized)
  if (isList && req.method === 'GET') return sendJson(res, 200, listBody)
  if (isList && req.method === 'POST') return createPlant(req, res)
  if (isOne && req.method === 'DELETE') {
    res.writeHead(204)
    return void res.end()
  }
  sendJson(res, 404, notFound)
}

const port = Number(process.argv[2])
createServer(handle).listen(port, '127.0.0.1')
process.once('SIGTERM', () => process.exit(0))
