import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { addressKey } from '../../src/limits/client-address.js'
import { trustedPeer } from '../../src/limits/trusted-peer.js'

describe('connection limits: whose connection it is', () => {
  test('counts an IPv6 client by its /64 and an IPv4-mapped one as its IPv4 address', () => {
    assert.equal(addressKey('2001:db8:1:2::1'), addressKey('2001:db8:1:2:ffff:ffff:ffff:ffff'))
    assert.notEqual(addressKey('2001:db8:1:2::1'), addressKey('2001:db8:1:3::1'))
    assert.equal(addressKey('::ffff:192.0.2.7'), '192.0.2.7')
    assert.notEqual(addressKey('192.0.2.7'), addressKey('192.0.2.8'))
  })

  test('treats peers as proxies exactly as TRUST_PROXY says', () => {
    assert.equal(trustedPeer(undefined)('192.0.2.7'), false)
    assert.equal(trustedPeer(false)('192.0.2.7'), false)
    assert.equal(trustedPeer(0)('192.0.2.7'), false)
    assert.equal(trustedPeer(true)('192.0.2.7'), true, 'true: every peer is a proxy')
    assert.equal(trustedPeer(1)('192.0.2.7'), true, 'a hop count trusts the nearest hop, whatever its address')
    const list = trustedPeer('10.0.0.0/8, 192.0.2.1,2001:db8::/32')
    assert.equal(list('10.1.2.3'), true)
    assert.equal(list('::ffff:10.1.2.3'), true, 'an IPv4-mapped peer matches its IPv4 entry')
    assert.equal(list('192.0.2.1'), true)
    assert.equal(list('192.0.2.2'), false)
    assert.equal(list('2001:db8:5::1'), true)
    assert.equal(list('2001:db9::1'), false)
  })
})
