import { existsSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { freePort, missingServerPrograms, ownForServers, pg } from './postgres-programs.js'

/** The server programs a replicated pair needs that are missing. */
export const missingPairPrograms = (): string[] => missingServerPrograms(['initdb', 'pg_ctl', 'pg_basebackup'])

/** The application name the standby streams under, which the primary's synchronous_standby_names names. */
const STANDBY_NAME = 'plantstore_standby'

/** One server of the pair: its data folder and port. */
export interface Node {
  data: string
  port: number
}

/**
 * A primary and a synchronous hot standby streaming from it, both on loopback, in `dir` (which the caller removes).
 * Synchronous replication is what makes a failover lose nothing: a commit returns to the client only once the standby
 * has flushed it.
 */
export class ReplicatedPostgres {
  readonly primary: Node
  readonly standby: Node

  private constructor(
    private readonly dir: string,
    ports: [number, number],
  ) {
    this.primary = { data: join(dir, 'primary'), port: ports[0] }
    this.standby = { data: join(dir, 'standby'), port: ports[1] }
  }

  /** Makes the primary (initdb), copies it into the standby (pg_basebackup -R), starts both and waits for sync. */
  static async create(dir: string): Promise<ReplicatedPostgres> {
    ownForServers(dir)
    const pair = new ReplicatedPostgres(dir, [await freePort(), await freePort()])
    const { primary, standby } = pair
    // A pair half made is stopped here: the caller has none to stop.
    try {
      // initdb's pg_hba.conf with --auth=trust lets loopback replication connections in.
      await pg('initdb', '-D', primary.data, '-U', 'postgres', '--auth=trust', '--no-sync')
      // The primary's replication settings go on its command line, not in postgresql.conf, so the copy the standby
      // starts from does not name a synchronous standby: promoted, it runs alone, and a commit there waits for nobody.
      await pair.start(primary, [
        '-c wal_level=replica',
        `-c synchronous_standby_names=${STANDBY_NAME}`,
        '-c synchronous_commit=on',
      ])
      const conninfo = `host=127.0.0.1 port=${primary.port} user=postgres application_name=${STANDBY_NAME}`
      await pg('pg_basebackup', '-d', conninfo, '-D', standby.data, '-R', '-X', 'stream', '--no-sync')
      await pair.start(standby, [])
      await pair.waitForSynchronousStandby()
    } catch (err) {
      await pair.stop()
      throw err
    }
    return pair
  }

  /** `postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres` (the primary's port first unless told), with `query`. */
  url(query = '', order: 'primary first' | 'standby first' = 'primary first'): string {
    const nodes = order === 'primary first' ? [this.primary, this.standby] : [this.standby, this.primary]
    const hosts = nodes.map((node) => `127.0.0.1:${node.port}`).join(',')
    return `postgres://postgres@${hosts}/postgres${query}`
  }

  /** Kills the primary as a crash would: `pg_ctl -m immediate stop`, no shutdown checkpoint. */
  crashPrimary(): Promise<void> {
    return pg('pg_ctl', '-D', this.primary.data, '-m', 'immediate', '-w', 'stop')
  }

  /** Ends recovery on the standby and waits until it accepts writes. */
  promoteStandby(): Promise<void> {
    return pg('pg_ctl', '-D', this.standby.data, '-w', 'promote')
  }

  /** Stops whichever of the two still runs, at once. For cleanup, whatever state a failed test left. */
  async stop(): Promise<void> {
    for (const node of [this.primary, this.standby])
      if (existsSync(join(node.data, 'postmaster.pid')))
        await pg('pg_ctl', '-D', node.data, '-m', 'immediate', '-w', 'stop').catch(() => {})
  }

  private start(node: Node, settings: string[]): Promise<void> {
    const options = [`-p ${node.port}`, `-k ${this.dir}`, '-c listen_addresses=127.0.0.1', ...settings].join(' ')
    const log = join(this.dir, `${node === this.primary ? 'primary' : 'standby'}.log`)
    return pg('pg_ctl', '-D', node.data, '-o', options, '-l', log, '-w', 'start')
  }

  /** Waits until the primary reports the standby streaming as its synchronous standby. */
  private async waitForSynchronousStandby(): Promise<void> {
    const sql = postgres(`postgres://postgres@127.0.0.1:${this.primary.port}/postgres`, { max: 1 })
    try {
      for (const started = Date.now(); Date.now() - started < 15_000;) {
        const rows =
          await sql`select state, sync_state from pg_stat_replication where application_name = ${STANDBY_NAME}`
        if (rows[0]?.state === 'streaming' && rows[0]?.sync_state === 'sync') return
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      throw new Error(`the standby did not become a streaming synchronous standby within 15 s (logs in ${this.dir})`)
    } finally {
      await sql.end({ timeout: 1 })
    }
  }
}
