import assert from 'node:assert/strict'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { after, describe, test } from 'node:test'
import { setTimeout } from 'node:timers/promises'
import { connect, endPool, sessionAttributes } from '../../../src/storage/postgres/client.js'
import { HostRotation, hostList, hostRotation, type HostAddress } from '../../../src/storage/postgres/hosts.js'
import { POSTGRES_URL } from '../../helpers/backends.js'

describe('PostgreSQL URLs naming several hosts', () => {
  test('lists each host with its port, in order, the default port for one without', () => {
    assert.deepEqual(hostList('postgres://app:p%40ss@10.0.0.1:5433,db2,db3:6000/store?sslmode=require'), [
      { host: '10.0.0.1', port: 5433 },
      { host: 'db2', port: 5432 },
      { host: 'db3', port: 6000 },
    ])
  })

  test('reads the hosts after the last @, so a password holding one stays out of them', () => {
    assert.deepEqual(hostList('postgres://app:a@b@h1:1,h2:2/db'), [
      { host: 'h1', port: 1 },
      { host: 'h2', port: 2 },
    ])
  })

  test('names no list, and makes no rotation, for a URL with one host', () => {
    assert.equal(hostList('postgres://app@127.0.0.1:5432/db?target_session_attrs=read-write'), undefined)
    assert.equal(hostRotation('postgresql://127.0.0.1/db'), undefined)
  })

  test('gives every pool of the process on the same hosts one rotation', () => {
    const first = hostRotation('postgres://a@h1:1,h2:2/one')
    assert.ok(first !== undefined)
    assert.equal(first.size, 2)
    assert.equal(hostRotation('postgres://b@h1:1,h2:2/two?application_name=x'), first)
    assert.notEqual(hostRotation('postgres://a@h2:2,h1:1/one'), first)
  })

  test('asks the client for a primary when the URL asks for read-write, and leaves other attributes to it', () => {
    assert.equal(sessionAttributes('postgres://h1,h2/db?target_session_attrs=read-write'), 'primary')
    assert.equal(sessionAttributes('postgres://h1,h2/db?sslmode=require&target_session_attrs=read-write'), 'primary')
    assert.equal(sessionAttributes('postgres://h1,h2/db?target_session_attrs=prefer-standby'), undefined)
    assert.equal(sessionAttributes('postgres://h1,h2/db'), undefined)
  })
})

describe('HostRotation, dialing the hosts of a multi-host URL', () => {
  const servers: Server[] = []
  const sockets: Socket[] = []
  after(async () => {
    for (const socket of sockets) socket.destroy()
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  })

  /** A loopback server that either ends each connection at once (as a standby is turned away) or keeps it open. */
  async function host(kind: 'refusing' | 'keeping'): Promise<HostAddress> {
    const server = createServer((socket) => (kind === 'refusing' ? socket.destroy() : sockets.push(socket)))
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return { host: '127.0.0.1', port: (server.address() as AddressInfo).port }
  }
  /** The rotation's next socket: the port it dials, and its close. */
  function dial(
    rotation: HostRotation,
    pool = rotation.forPool(),
  ): { port: number; socket: Socket; closed: Promise<void> } {
    const socket = pool.socket()
    sockets.push(socket)
    socket.on('error', () => {}) // as the client listens: a host that cannot be reached is an error event
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    return { port: (socket as Socket & { port: number }).port, socket, closed }
  }
  /** A host nothing listens on. */
  async function unreachable(): Promise<HostAddress> {
    const address = await host('keeping')
    await new Promise((resolve) => servers.pop()!.close(resolve))
    return address
  }

  test('keeps to a host whose sessions stay open', async () => {
    const kept = await host('keeping')
    const rotation = new HostRotation([kept, await host('keeping')])
    for (let i = 0; i < 3; i++) assert.equal(dial(rotation).port, kept.port)
  })

  test('moves on from a host that cannot be reached, and from one that ends the session at once, to one that works', async () => {
    const [down, refusing, working] = [await unreachable(), await host('refusing'), await host('keeping')]
    const rotation = new HostRotation([down, refusing, working])
    const first = dial(rotation)
    assert.equal(first.port, down.port)
    await first.closed
    const second = dial(rotation)
    assert.equal(second.port, refusing.port)
    await second.closed
    assert.equal(dial(rotation).port, working.port)
    assert.equal(dial(rotation).port, working.port)
  })

  test('goes round to the first host again after the last', async () => {
    const [down, refusing] = [await unreachable(), await host('refusing')]
    const rotation = new HostRotation([down, refusing])
    const dialed = []
    for (let i = 0; i < 3; i++) {
      const attempt = dial(rotation)
      dialed.push(attempt.port)
      await attempt.closed
    }
    assert.deepEqual(dialed, [down.port, refusing.port, down.port])
  })

  test('stays on a host whose session closes after it was open for a while (not a refusal)', async () => {
    const [first, second] = [await host('keeping'), await host('keeping')]
    const rotation = new HostRotation([first, second])
    const session = dial(rotation)
    await new Promise((resolve) => session.socket.once('connect', resolve))
    await setTimeout(2100) // REFUSED_WITHIN_MS and a little
    session.socket.destroy()
    await session.closed
    assert.equal(dial(rotation).port, first.port)
  })

  test('stays on a host when a pool closes its own session at once, as a pool made for one statement does', async () => {
    const [first, second] = [await host('keeping'), await host('keeping')]
    const rotation = new HostRotation([first, second])
    const pool = rotation.forPool()
    const session = dial(rotation, pool)
    await new Promise((resolve) => session.socket.once('connect', resolve))
    pool.ending()
    session.socket.destroy()
    await session.closed
    assert.equal(dial(rotation).port, first.port, "the pool's own close is no refusal")
    // Another pool's sockets are still watched: the same quick close from one that is not ending moves on.
    const other = dial(rotation)
    await new Promise((resolve) => other.socket.once('connect', resolve))
    other.socket.destroy()
    await other.closed
    assert.equal(dial(rotation).port, second.port)
  })

  test('tells when it has moved on from a refusing host, and gives up waiting when it does not move', async () => {
    const [refusing, working] = [await host('refusing'), await host('keeping')]
    const moving = new HostRotation([refusing, working])
    assert.equal(moving.current, refusing)
    dial(moving)
    await moving.movedOn(refusing, 60_000)
    assert.equal(moving.current, working)
    const staying = new HostRotation([working, refusing])
    dial(staying)
    await staying.movedOn(working, 50)
    assert.equal(staying.current, working)
  })
})

if (POSTGRES_URL !== undefined)
  describe('a pool on a multi-host URL, on a real PostgreSQL', () => {
    test('ends without moving the other pools of the process off the host it used', async () => {
      // The test server twice in the host list: the rotation is the process's over that list.
      const multi = POSTGRES_URL!.replace(/^(\w+:\/\/(?:[^@/]*@)?)([^/?]+)/, '$1$2,$2')
      const rotation = hostRotation(multi)!
      const first = rotation.current
      const pool = connect(multi, 1)
      try {
        assert.equal((await pool`SELECT 1 AS one`)[0]?.one, 1)
      } finally {
        await endPool(pool)
      }
      // Its socket closed well within REFUSED_WITHIN_MS of opening: only the pool's word keeps it from counting.
      await setTimeout(50)
      assert.equal(rotation.current, first)
    })
  })
