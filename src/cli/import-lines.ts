import { isUtf8 } from 'node:buffer'
import type { Readable } from 'node:stream'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import type { TSchema } from '@sinclair/typebox'
import { ConfigError } from '../config.js'
import { parseInt64 } from '../schemas/int64.js'
import {
  EXPORT_FORMAT,
  EXPORT_VERSION,
  EndLine,
  ExportHeader,
  RECORD_LINES,
  type AccountLine,
  type PlantLine,
  type RecordType,
  type SubscriptionLine,
  type TokenLine,
} from '../schemas/transfer.js'
import type { EntryCounts, StoreEntry } from '../storage/index.js'
import { storedUrlProblem } from '../webhooks/url-policy.js'

const LF = 0x0a
const CR = 0x0d

/** The longest line read: a record is far shorter, and a stream without line ends must not fill memory. */
export const MAX_LINE_BYTES = 1024 * 1024

/**
 * The lines of `input` (UTF-8, LF or CRLF ends), each at most MAX_LINE_BYTES long in UTF-8 bytes. A line that is not
 * valid UTF-8 is refused, as the API refuses such a body: decoded, it would be stored with U+FFFD in its place.
 * Lines are cut at the byte LF, which UTF-8 never uses within a character.
 */
export async function* lines(input: Readable): AsyncIterable<string> {
  let rest: Buffer = Buffer.alloc(0)
  let number = 0
  const text = (bytes: Buffer) => {
    if (!isUtf8(bytes)) throw new ConfigError(`line ${number}: not valid UTF-8`)
    return bytes.toString('utf8')
  }
  for await (const chunk of input as AsyncIterable<Buffer>) {
    const bytes = rest.length === 0 ? chunk : Buffer.concat([rest, chunk])
    let start = 0
    let end: number
    while ((end = bytes.indexOf(LF, start)) !== -1) {
      number++
      yield text(bytes.subarray(start, end > start && bytes[end - 1] === CR ? end - 1 : end))
      start = end + 1
    }
    rest = bytes.subarray(start)
    if (rest.length > MAX_LINE_BYTES) throw new ConfigError(`line ${number + 1}: longer than ${MAX_LINE_BYTES} bytes`)
  }
  number++
  if (rest.length > 0) yield text(rest)
}

const compiled = <T extends TSchema>(schema: T): TypeCheck<T> => TypeCompiler.Compile(schema)
const HEADER = compiled(ExportHeader)
const END = compiled(EndLine)
const CHECKS = {
  account: compiled(RECORD_LINES.account),
  token: compiled(RECORD_LINES.token),
  plant: compiled(RECORD_LINES.plant),
  subscription: compiled(RECORD_LINES.subscription),
}
const ORDER: readonly RecordType[] = ['account', 'token', 'plant', 'subscription']

const KINDS = ['accounts', 'tokens', 'plants', 'subscriptions'] as const

/** The first problem `check` finds in `value`, worded with the field's path. */
function problem(check: TypeCheck<TSchema>, value: unknown): string {
  const first = check.Errors(value).First()
  if (first === undefined) return 'invalid'
  const field = first.path.slice(1).replaceAll('/', '.')
  return `${field === '' ? '' : `${field}: `}${first.message.replace(/^Expected/, 'expected')}`
}

/** A time of the format (ISO, milliseconds, UTC) as a Date; undefined for one that names no real instant. */
function instant(text: string | null): Date | null | undefined {
  if (text === null) return null
  const date = new Date(text)
  return Number.isNaN(date.getTime()) || date.toISOString() !== text ? undefined : date
}

class LineError extends Error {}

/**
 * Turns the lines of an export into records, checking each before it is yielded: the header first (its format and
 * version), every record against its schema (src/schemas/transfer.ts), and the order the import relies on: accounts,
 * tokens, plants, subscriptions; each name and id once; records of declared accounts only (of the header's account
 * in an account's export); an account's plants together, ids ascending; last, the end line, whose counts must
 * be those read (else the export was cut off). The first bad line, or an input without its end line, ends it with
 * a ConfigError, thrown before the entries end, so that the writer (which commits only at their end) writes nothing. Memory grows with accounts, tokens and subscriptions, never with plants.
 */
export class EntryReader {
  /** Lines read so far, the header included. */
  lineNumber = 0
  readonly #allowPrivate: boolean
  #header: ExportHeader | undefined
  #section = 0
  readonly #accounts = new Set<string>()
  // Each token read, with its account; and the makers named before any token of theirs was read.
  readonly #tokens = new Map<string, string>()
  readonly #makersNotRead = new Set<string>()
  readonly #hashes = new Set<string>()
  readonly #subscriptions = new Set<string>()
  #plantAccount: string | undefined
  #lastPlant: bigint | undefined
  readonly #plantedAccounts = new Set<string>()
  readonly #counts: EntryCounts = { accounts: 0, tokens: 0, plants: 0, subscriptions: 0 }
  #ended = false

  /** `allowPrivate`: subscriptions may name private addresses (PLANTSTORE_WEBHOOK_ALLOW_PRIVATE), as in the API. */
  constructor({ allowPrivate }: { allowPrivate: boolean }) {
    this.#allowPrivate = allowPrivate
  }

  async *entries(input: AsyncIterable<string>): AsyncIterable<StoreEntry> {
    for await (const line of input) {
      this.lineNumber++
      try {
        const entry = this.#read(line)
        if (entry !== undefined) yield entry
      } catch (err) {
        if (err instanceof LineError) throw new ConfigError(`line ${this.lineNumber}: ${err.message}`)
        throw err
      }
    }
    if (this.#header === undefined) throw new ConfigError('line 1: no header: the input is empty')
    if (!this.#ended) {
      throw new ConfigError(`line ${this.lineNumber}: the input ends before the export's end line (truncated?)`)
    }
  }

  #read(line: string): StoreEntry | undefined {
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch (err) {
      throw new LineError(`not JSON: ${(err as Error).message}`)
    }
    if (this.#header === undefined) {
      this.#header = this.#headerOf(value)
      return undefined
    }
    if (this.#ended) throw new LineError("a line after the export's end line")
    const type = (value as { type?: unknown } | null)?.type
    if (type === 'end') return this.#end(value)
    if (typeof type !== 'string' || !Object.hasOwn(CHECKS, type)) {
      throw new LineError(`expected a record whose "type" is one of ${ORDER.join(', ')}`)
    }
    const check = CHECKS[type as RecordType] as TypeCheck<TSchema>
    if (!check.Check(value)) throw new LineError(`${type} record: ${problem(check, value)}`)
    this.#inOrder(type as RecordType)
    this.#counts[`${type as RecordType}s`]++
    return this.#entry(value as AccountLine | TokenLine | PlantLine | SubscriptionLine)
  }

  #headerOf(value: unknown): ExportHeader {
    const format = (value as { format?: unknown } | null)?.format
    if (format !== EXPORT_FORMAT) {
      throw new LineError(`expected the header of a ${EXPORT_FORMAT} (see plantstore export), not this`)
    }
    if (!HEADER.Check(value)) throw new LineError(`header: ${problem(HEADER, value)}`)
    if (value.version !== EXPORT_VERSION) {
      throw new LineError(`${EXPORT_FORMAT} version ${value.version}; this release reads version ${EXPORT_VERSION}`)
    }
    return value
  }

  #end(value: unknown): undefined {
    if (!END.Check(value)) throw new LineError(`end line: ${problem(END, value)}`)
    const differ = KINDS.filter((kind) => value.counts[kind] !== this.#counts[kind])
    if (differ.length > 0) {
      const said = differ.map((kind) => `${value.counts[kind]} ${kind}`).join(', ')
      const read = differ.map((kind) => `${this.#counts[kind]}`).join(', ')
      throw new LineError(`end line: the export counts ${said}; the input holds ${read} (records lost?)`)
    }
    this.#ended = true
    return undefined
  }

  #inOrder(type: RecordType): void {
    const section = ORDER.indexOf(type)
    if (section < this.#section) {
      throw new LineError(`${type} record after ${ORDER[this.#section]} records (expected ${ORDER.join(', ')})`)
    }
    this.#section = section
  }

  #entry(line: AccountLine | TokenLine | PlantLine | SubscriptionLine): StoreEntry {
    if (line.type === 'account') {
      this.#declared(line.name, false)
      this.#accounts.add(line.name)
      return { type: 'account', name: line.name, createdAt: this.#time(line.createdAt, 'createdAt')! }
    }
    this.#declared(line.account, true)
    switch (line.type) {
      case 'token':
        return this.#token(line)
      case 'plant':
        return this.#plant(line)
      case 'subscription':
        return this.#subscription(line)
    }
  }

  /** Checks that the header allows `account`, and that it was declared before (`known`) or is new. */
  #declared(account: string, known: boolean): void {
    const only = this.#header!.account
    if (only !== null && account !== only) {
      throw new LineError(`account ${JSON.stringify(account)} in an export of account ${JSON.stringify(only)}`)
    }
    if (known && !this.#accounts.has(account)) {
      throw new LineError(`account ${JSON.stringify(account)} has no account record before it`)
    }
    if (!known && this.#accounts.has(account)) throw new LineError(`account ${JSON.stringify(account)} again`)
  }

  #time(text: string | null, field: string): Date | null {
    const date = instant(text)
    if (date === undefined) throw new LineError(`${field}: ${text} is no real instant`)
    return date
  }

  #once(seen: Set<string>, key: string, what: string): void {
    if (seen.has(key)) throw new LineError(`${what} again`)
    seen.add(key)
  }

  #token(line: TokenLine): StoreEntry {
    if (this.#tokens.has(line.id)) throw new LineError(`token ${line.id} again`)
    if (this.#makersNotRead.has(line.id)) {
      throw new LineError(`token ${line.id} after a token it made (a maker comes before the tokens it made)`)
    }
    this.#maker(line)
    this.#tokens.set(line.id, line.account)
    this.#once(this.#hashes, line.secretHash, `secretHash of token ${line.id}`)
    return {
      type: 'token',
      id: line.id,
      account: line.account,
      secretHash: Buffer.from(line.secretHash, 'base64url'),
      scopes: line.scopes,
      label: line.label,
      createdAt: this.#time(line.createdAt, 'createdAt')!,
      expiresAt: this.#time(line.expiresAt, 'expiresAt'),
      revokedAt: this.#time(line.revokedAt, 'revokedAt'),
      createdBy: line.createdBy,
    }
  }

  /**
   * Checks a token's maker is one the API records: none (made by the CLI, a first start or a JWT), a token of the
   * same account read before it, or one the store no longer holds (deleted: what it made ends with it, and stays
   * refused through its lineage). Another account's token as maker would let that account end ours (DELETE /tokens).
   */
  #maker(line: TokenLine): void {
    const maker = line.createdBy
    if (maker === null) return
    if (maker === line.id) throw new LineError(`token ${line.id}: createdBy: the token itself`)
    const account = this.#tokens.get(maker)
    if (account === undefined) this.#makersNotRead.add(maker)
    else if (account !== line.account) {
      throw new LineError(`token ${line.id}: createdBy: ${maker} is a token of another account`)
    }
  }

  #plant(line: PlantLine): StoreEntry {
    const id = parseInt64(line.id)
    if (id === undefined) throw new LineError(`plant record: id: ${line.id} is outside the int64 range`)
    if (line.account !== this.#plantAccount) {
      this.#once(this.#plantedAccounts, line.account, `plants of account ${JSON.stringify(line.account)} apart`)
      this.#plantAccount = line.account
    } else if (id <= this.#lastPlant!) {
      throw new LineError(`plant record: id ${line.id} after ${this.#lastPlant}: an account's ids must ascend`)
    }
    this.#lastPlant = id
    return { type: 'plant', account: line.account, id, name: line.name, tag: line.tag }
  }

  #subscription(line: SubscriptionLine): StoreEntry {
    this.#once(this.#subscriptions, line.id, `subscription ${line.id}`)
    // The rule the API and webhooks add apply, but for looking names up; the URL is not shown (it may hold a
    // password).
    const problem = storedUrlProblem(line.url, this.#allowPrivate)
    if (problem !== undefined) throw new LineError(`subscription ${line.id}: url: ${problem}`)
    return {
      type: 'subscription',
      id: line.id,
      account: line.account,
      url: line.url,
      secret: line.secret,
      eventTypes: line.eventTypes,
      createdAt: this.#time(line.createdAt, 'createdAt')!,
      state: line.state,
      disabledReason: line.disabledReason,
      disabledAt: this.#time(line.disabledAt, 'disabledAt'),
    }
  }
}
