/** How often a progress line is rewritten, at most. */
const EVERY_MS = 500

/**
 * A line on stderr rewritten in place while a long command runs, when stderr is a terminal (nothing otherwise, so
 * logs and pipes get the final summary alone). `text` is built by the command, from counts only.
 */
export class Progress {
  readonly #on = process.stderr.isTTY === true
  // The first tick always shows: a command quicker than EVERY_MS still says what it is doing.
  #last = -Infinity
  #shown = ''

  constructor(private readonly everyMs = EVERY_MS) {}

  /**
   * Shows `text()` unless a line was shown less than `everyMs` ago, or it is the line already shown, or undefined
   * (nothing to say yet). Cheap enough to call for every record.
   */
  tick(text: () => string | undefined): void {
    if (!this.#on) return
    const now = performance.now()
    if (now - this.#last < this.everyMs) return
    const line = text()
    if (line === undefined || line === this.#shown) return
    this.#last = now
    this.#shown = line
    process.stderr.write(`\r\x1b[K${line}`)
  }

  /** Clears the line, so what is printed next (the summary) starts on a clean one. */
  done(): void {
    if (this.#shown !== '') process.stderr.write('\r\x1b[K')
    this.#shown = ''
  }
}
