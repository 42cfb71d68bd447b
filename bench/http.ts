import { request } from 'node:http'

/** A GET's status, body and Link header. */
export interface Page {
  status: number
  body: string
  link: string | undefined
}

/** GETs `path`, with the bearer token when one is given. */
export function getPage(url: string, token: string | undefined, path: string): Promise<Page> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` }
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.on('end', () => {
        const link = res.headers.link
        resolve({ status: res.statusCode ?? 0, body: text, link: Array.isArray(link) ? link.join(', ') : link })
      })
    })
    req.once('error', reject)
    req.end()
  })
}
