/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and says where the server's CPU time went, by part of the service.
 * Each sample goes to the part that owns the innermost frame a rule recognises, so native work (a writev, a
 * SHA-256) counts for the code that asked for it: the socket write for HTTP, the hash for authentication.
 */
import { readFileSync } from 'node:fs'

interface CallFrame {
  functionName: string
  url: string
}

interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}

interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** First match wins, tried from the innermost frame outwards. */
const PARTS: ReadonlyArray<{ part: string; matches: (frame: CallFrame) => boolean }> = [
  { part: 'idle (waiting for the network or the disk)', matches: (f) => f.functionName === '(idle)' },
  { part: 'garbage collection', matches: (f) => f.functionName === '(garbage collector)' },
  {
    part: 'storage: SQL and the database client',
    matches: byPath(['/better-sqlite3/', '/postgres/', 'dist/storage/']),
  },
  {
    part: 'logging (pino, redaction, the request log line)',
    matches: byPath(['/pino/', '/@pinojs/', '/sonic-boom/', '/pino-std-serializers/', 'dist/plugins/request-log']),
  },
  { part: 'metrics (prom-client)', matches: byPath(['/prom-client/', 'dist/plugins/metrics']) },
  { part: 'rate limits', matches: byPath(['/@fastify/rate-limit/', 'dist/plugins/rate-limit', 'dist/limits/']) },
  { part: 'authentication (bearer check, token hash, cache)', matches: byPath(['dist/auth/']) },
  { part: 'route handlers (pages, cursors, Link header)', matches: byPath(['dist/routes/', 'dist/schemas/']) },
  { part: 'other service code', matches: byPath(['dist/']) },
  {
    part: 'Fastify: routing, hooks, validation, serialisation',
    matches: (f) =>
      byPath(['/fastify/', '/find-my-way/', '/fast-json-stringify/', '/@fastify/', '/avvio/', '/ajv/'])(f) ||
      // Compiled validators and serialisers have no URL.
      (f.url === '' && /^anonymous\d*$/.test(f.functionName)),
  },
  {
    part: 'Node HTTP: parsing, sockets, writes',
    matches: byPath(['node:_http', 'node:net', 'node:internal/stream', 'node:internal/streams', 'node:stream']),
  },
  {
    part: 'event loop, promises, timers',
    matches: (f) =>
      byPath(['node:internal/process/', 'node:internal/timers', 'node:timers'])(f) ||
      ['runMicrotasks', '(program)'].includes(f.functionName),
  },
]

function byPath(fragments: string[]): (frame: CallFrame) => boolean {
  return (frame) => frame.url !== '' && fragments.some((fragment) => frame.url.includes(fragment))
}

/** CPU time per part, in microseconds, plus the total sampled. */
export interface ProfileSummary {
  totalUs: number
  parts: Array<{ part: string; us: number }>
  /** Semicolon-joined stacks with their microseconds: the folded format flame graph tools read. */
  folded: string
}

function partOf(stack: CallFrame[]): string {
  for (const frame of stack) {
    const rule = PARTS.find((candidate) => candidate.matches(frame))
    if (rule !== undefined) return rule.part
  }
  return 'other (Node internals)'
}

function frameName(frame: CallFrame): string {
  const where = frame.url.replace(/^.*\/node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/')
  return `${frame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`.replaceAll(';', ',')
}

export function summariseProfile(file: string): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const timeById = new Map<number, number>()
  profile.samples.forEach((id, i) => timeById.set(id, (timeById.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))

  const parts = new Map<string, number>()
  const folded: string[] = []
  let totalUs = 0
  for (const [id, us] of timeById) {
    const stack: CallFrame[] = []
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(byId.get(at)!.callFrame)
    const part = partOf(stack)
    parts.set(part, (parts.get(part) ?? 0) + us)
    totalUs += us
    folded.push(`${stack.slice(0, -1).reverse().map(frameName).join(';')} ${us}`)
  }
  return {
    totalUs,
    parts: [...parts].map(([part, us]) => ({ part, us })).sort((a, b) => b.us - a.us),
    folded: folded.join('\n') + '\n',
  }
}
