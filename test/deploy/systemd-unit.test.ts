import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ConfigSchema } from '../../src/config.js'
import { REPO_ROOT, tempDir } from '../helpers/server-process.js'

const UNIT = readFileSync(join(REPO_ROOT, 'deploy', 'plantstore.service'), 'utf8')

/** The unit's `key=value` lines of `section`, the last value of each key. */
function section(name: string): Map<string, string> {
  const lines = UNIT.split(`[${name}]\n`)[1]!.split(/\n\[/)[0]!.split('\n')
  return new Map(
    lines.filter((line) => /^[A-Za-z]+=/.test(line)).map((line) => line.split(/=(.*)/).slice(0, 2) as [string, string]),
  )
}

const service = section('Service')

describe('the systemd unit (deploy/plantstore.service)', () => {
  test('runs bin/plantstore.js serve from the install, as its own user, restarted after a failure', () => {
    const home = service.get('WorkingDirectory')!
    assert.equal(service.get('ExecStart'), `${home}/bin/plantstore.js serve`)
    assert.equal(service.get('User'), 'plantstore')
    assert.equal(service.get('Restart'), 'on-failure')
    assert.equal(service.get('NoNewPrivileges'), 'yes')
    assert.equal(service.get('ProtectSystem'), 'strict')
    assert.match(service.get('Environment')!, /^DATABASE_URL=sqlite:\/var\/lib\/plantstore\//)
    assert.equal(service.get('StateDirectory'), 'plantstore')
  })

  test("stops with SIGTERM and waits longer than the default drain, grace and spans' flush, so a graceful stop is not killed", () => {
    const value = (key: 'SHUTDOWN_DRAIN_SECONDS' | 'SHUTDOWN_GRACE_SECONDS' | 'SHUTDOWN_TRACE_FLUSH_MS') =>
      ConfigSchema.properties[key].default as number
    assert.equal(service.get('KillSignal'), 'SIGTERM')
    const timeout = Number(service.get('TimeoutStopSec'))
    const deadline =
      value('SHUTDOWN_DRAIN_SECONDS') + value('SHUTDOWN_GRACE_SECONDS') + 5 + value('SHUTDOWN_TRACE_FLUSH_MS') / 1000
    assert.ok(timeout > deadline, String(timeout))
  })

  test('passes systemd-analyze verify without a warning, installed where this checkout is', async (t) => {
    // The unit names /opt/plantstore; verify checks that ExecStart's file is executable, so it is pointed here.
    const unit = join(tempDir(), 'plantstore.service')
    writeFileSync(unit, UNIT.replaceAll('/opt/plantstore', REPO_ROOT.replace(/\/$/, '')))
    try {
      const { stderr } = await promisify(execFile)('systemd-analyze', ['verify', unit])
      assert.equal(stderr, '')
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'ENOENT') throw err
      t.diagnostic('systemd-analyze is not installed here: the unit was checked by the tests above only')
    }
  })
})
