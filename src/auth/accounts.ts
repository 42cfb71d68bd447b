import type { TokenStore } from '../storage/index.js'

const MAX_KNOWN = 10_000

/**
 * Account ids by name, for callers the database does not vouch for itself (a JWT names its account): the account is
 * created on first use, and its id kept so later requests need no database call. Accounts are never deleted, so a
 * remembered id stays right.
 */
export class AccountDirectory {
  readonly #tokens: Pick<TokenStore, 'accountId'>
  readonly #ids = new Map<string, number>()

  constructor(tokens: Pick<TokenStore, 'accountId'>) {
    this.#tokens = tokens
  }

  /** The id of account `name` when already known here; undefined when it must be looked up. */
  known(name: string): number | undefined {
    return this.#ids.get(name)
  }

  async resolve(name: string): Promise<number> {
    const id = await this.#tokens.accountId(name)
    if (this.#ids.size >= MAX_KNOWN) this.#ids.delete(this.#ids.keys().next().value!)
    this.#ids.set(name, id)
    return id
  }
}
