import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import { VERSION } from '../version.js'
import { hostOf, isPrivateAddress, webhookTarget } from './url-policy.js'

/** How one attempt went: the receiver's status (null when none came) and, unless it was 2xx, why it failed. */
export interface AttemptResult {
  ok: boolean
  status: number | null
  error: string | null
}

/** Bytes of a receiver's answer kept for the delivery record; the rest is never read. */
const EXCERPT_BYTES = 256

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/**
 * A DNS lookup that refuses private addresses, used by the connection itself: the address checked is the address
 * connected to, so a name that resolves differently at delivery time (DNS rebinding) cannot slip through.
 */
function publicOnlyLookup(hostname: string, options: object, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, [])
    const blocked = addresses.find((entry) => isPrivateAddress(entry.address))
    if (blocked !== undefined) {
      return callback(
        Object.assign(new Error(`${hostname} resolves to private address ${blocked.address}`), { code: 'EPRIVATE' }),
        [],
      )
    }
    if ((options as { all?: boolean }).all === true) return callback(null, addresses)
    callback(null, addresses[0]!.address, addresses[0]!.family)
  })
}

function excerpt(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = ''
    res.setEncoding('utf8')
    res.on('data', (chunk: string) => {
      text += chunk
      if (text.length >= EXCERPT_BYTES) res.destroy()
    })
    res.on('close', () => resolve(text.slice(0, EXCERPT_BYTES)))
    res.on('error', () => resolve(text.slice(0, EXCERPT_BYTES)))
  })
}

/**
 * POSTs `body` to `url` with `headers`, once: no redirect followed (3xx is a failure), `timeoutMs` for the whole
 * exchange, no URL the API would refuse as a target (webhookTarget), and unless `allowPrivate` no private, loopback
 * or link-local address connected to; `signal` cuts it short, its reason the failure. Resolves with the failure
 * whatever the URL; a header Node refuses rejects (the dispatcher records that as a failed attempt too).
 */
export function send(
  url: string,
  headers: Record<string, string>,
  body: string,
  options: { timeoutMs: number; allowPrivate: boolean; signal?: AbortSignal },
): Promise<AttemptResult> {
  return new Promise((resolve) => {
    const fail = (status: number | null, error: string) => resolve({ ok: false, status, error })
    // A store written before every way in checked URLs may hold one the API refuses: a failed attempt, never sent
    // (its credentials least of all).
    const target = webhookTarget(url)
    if (typeof target === 'string') return fail(null, `URL ${target}`)
    if (!options.allowPrivate && isIP(hostOf(target)) !== 0 && isPrivateAddress(hostOf(target))) {
      return fail(null, `${hostOf(target)} is a private, loopback or link-local address`)
    }
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        'user-agent': `plantstore/${VERSION}`,
      },
      ...(!options.allowPrivate && { lookup: publicOnlyLookup }),
    })
    // Settles at the first of: a status, an error, the timeout (the promise ignores what comes after).
    const timer = setTimeout(() => {
      request.destroy()
      fail(null, `no answer within ${options.timeoutMs} ms`)
    }, options.timeoutMs)
    request.on('response', (res) => {
      const status = res.statusCode ?? 0
      if (status >= 200 && status < 300) {
        clearTimeout(timer)
        res.destroy()
        return resolve({ ok: true, status, error: null })
      }
      void excerpt(res).then((text) => {
        clearTimeout(timer)
        const why = status >= 300 && status < 400 ? 'redirect not followed' : 'not 2xx'
        fail(status, `${why}${text === '' ? '' : `: ${text}`}`)
      })
    })
    request.on('error', (err) => {
      clearTimeout(timer)
      fail(null, err.message)
    })
    options.signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      request.destroy()
      fail(null, String(options.signal?.reason))
    })
    request.end(body)
  })
}
