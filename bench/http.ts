import { request } from 'node:http'

/** A GET's status, body and Link header. */
export interface Page {
  status: number
  body: string
  link: string | undefined
}

/** GETs `path` with the token. */
export function getPage(url: string, token: string, path: string): Promise<Page> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      let text = ''
      res.on('data', (chunk: Buffer) => (text += chunk.toString()))
      res.on('end', () => {
        const link = res.headers.link
        resolve({ status: res.statusCode ?? 0, body: text, link: Array.isArray(link) ? link.join(', ') : link })
      })
    })
    req.once('error', reject)
    req.end()
  })
}
