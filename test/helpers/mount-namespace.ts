import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'

// Tests that fill a disk for real mount a small tmpfs in a mount namespace of their own (a user namespace makes that
// possible without root), with unshare -Urm. Without it they are skipped on a developer's machine, unless
// PLANTSTORE_TEST_REQUIRE_UNSHARE=1 (CI sets it): then they run and fail saying what is missing, so CI cannot pass
// without them.
const REQUIRED = process.env.PLANTSTORE_TEST_REQUIRE_UNSHARE === '1'

const probe = spawnSync('unshare', ['-Urm', 'sh', '-c', 'mount -t tmpfs -o size=1m plantstore-test /mnt'], {
  encoding: 'utf8',
})
/** Why no tmpfs can be mounted so here, or undefined when one can. */
const missing =
  probe.status === 0
    ? undefined
    : `unshare -Urm cannot mount a tmpfs (util-linux and mount; user and mount namespaces): ${
        probe.error?.message ?? probe.stderr.trim()
      }`

/** The `skip` option of such a test or suite. */
export const skipWithoutMountNamespace =
  missing === undefined || REQUIRED ? false : 'needs unshare -Urm (user and mount namespaces) to mount a small tmpfs'

/** Fails the test, saying what is missing, when it runs (because it is required) without unshare -Urm. */
export function assertMountNamespace(): void {
  assert.equal(missing, undefined, `PLANTSTORE_TEST_REQUIRE_UNSHARE=1 but ${missing}`)
}
