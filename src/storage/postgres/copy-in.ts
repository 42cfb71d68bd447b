import { once } from 'node:events'
import type { Writable } from 'node:stream'
import type { Sql } from './client.js'

/** Bytes gathered before one write to the COPY stream: fewer, larger CopyData messages. */
const CHUNK_BYTES = 256 * 1024

/** A text-format COPY field: NULL as \N, and the characters COPY gives a meaning to escaped. */
export function copyField(value: string | null): string {
  if (value === null) return '\\N'
  return /[\\\t\n\r]/.test(value)
    ? value.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c]!)
    : value
}

/** Rows streamed into `COPY table (columns) FROM STDIN`, in chunks, waiting when the connection is behind. */
export class CopyIn {
  #stream: Writable | undefined
  #chunk = ''
  #failed: Error | undefined

  private constructor(stream: Writable) {
    this.#stream = stream
    stream.on('error', (err: Error) => (this.#failed ??= err))
  }

  static async start(sql: Sql, table: string, columns: string[]): Promise<CopyIn> {
    const stream = await sql.unsafe(`COPY ${table} (${columns.join(', ')}) FROM STDIN`).writable()
    return new CopyIn(stream)
  }

  /** Adds one row of fields already escaped (copyField). */
  async row(fields: string[]): Promise<void> {
    this.#chunk += fields.join('\t') + '\n'
    if (this.#chunk.length >= CHUNK_BYTES) await this.#flush()
  }

  async #flush(): Promise<void> {
    if (this.#failed) throw this.#failed
    const chunk = this.#chunk
    this.#chunk = ''
    if (chunk !== '' && !this.#stream!.write(chunk)) await once(this.#stream!, 'drain')
  }

  /** Abandons the COPY (PostgreSQL keeps none of its rows), when the records stop with an error. */
  abort(reason: Error): void {
    this.#stream?.destroy(reason)
    this.#stream = undefined
  }

  /** Ends the COPY; resolves once PostgreSQL has taken every row. */
  async end(): Promise<void> {
    await this.#flush()
    const stream = this.#stream!
    this.#stream = undefined
    const finished = once(stream, 'finish')
    stream.end()
    await finished
  }
}
