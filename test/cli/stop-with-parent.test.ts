import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { startedByPackageManager } from '../../src/cli/stop-with-parent.js'

describe('which servers stop with the process that started them', () => {
  const npm = { npm_lifecycle_event: 'start' }

  test('those npm started: npm itself as the parent, or its plain sh -c for the command', () => {
    assert.equal(startedByPackageManager(npm, ['node', '/usr/lib/node_modules/npm/bin/npm-cli.js', 'start']), true)
    assert.equal(startedByPackageManager(npm, ['sh', '-c', 'plantstore serve']), true)
    assert.equal(startedByPackageManager(npm, ['/bin/sh', '-c', 'node dist/cli/main.js serve --port 8080']), true)
  })

  test('not those a script started to outlive it (nohup, &, setsid), nor any without npm’s environment', () => {
    for (const script of [
      'nohup plantstore serve',
      'plantstore serve & wait-on http://127.0.0.1:8080',
      'setsid plantstore serve',
    ]) {
      assert.equal(startedByPackageManager(npm, ['sh', '-c', script]), false, script)
    }
    assert.equal(startedByPackageManager({}, ['sh', '-c', 'plantstore serve']), false)
    assert.equal(startedByPackageManager(npm, ['/sbin/init']), false, 'a parent that is gone already (re-parented)')
    assert.equal(startedByPackageManager(npm, undefined), false, 'a parent whose command line cannot be read')
  })
})
