import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { restartablePort } from './free-port.js'

/**
 * A redis-server of the test's own on a loopback port, without persistence, that can be killed, started again on
 * the same port, frozen (SIGSTOP) and thawed (SIGCONT).
 */
export class RedisServer {
  readonly port: number
  #child: ChildProcess | undefined

  private constructor(port: number) {
    this.port = port
  }

  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await restartablePort())
    await server.restart()
    return server
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  /** Starts the server (again), resolving once it accepts connections (within 10 s, or rejects). */
  async restart(): Promise<void> {
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    this.#child = child
    let output = ''
    child.stdout!.setEncoding('utf8')
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server not ready in 10 s: ${output}`)), 10_000)
      child.stdout!.on('data', (chunk: string) => {
        output += chunk
        if (output.includes('Ready to accept connections')) {
          clearTimeout(timer)
          resolve()
        }
      })
      child.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`redis-server exited with ${code}: ${output}`))
      })
    })
    await ready
  }

  /** SIGKILL, resolving once it has exited. */
  async kill(): Promise<void> {
    const child = this.#child
    this.#child = undefined
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGCONT')
    child.kill('SIGKILL')
    await once(child, 'exit')
  }

  freeze(): void {
    this.#child?.kill('SIGSTOP')
  }

  thaw(): void {
    this.#child?.kill('SIGCONT')
  }
}
