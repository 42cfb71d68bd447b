import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { send } from '../../src/webhooks/send.js'
import { isPrivateAddress, urlProblem } from '../../src/webhooks/url-policy.js'

// Addresses no webhook may reach though the ranges above them were not refused before: documentation (RFC 5737,
// RFC 3849, RFC 9637), the deprecated 6to4 relay anycast, and in IPv6 the IETF protocol assignments (Teredo,
// benchmarking), discard-only, the dummy prefix, SRv6 SIDs and anything outside global unicast 2000::/3.
// What the sender of a URL is told of any host that is not public, whatever the reason.
const NOT_PUBLIC = 'must name a host that resolves to public addresses only'

const NOT_GLOBAL = [
  '192.0.2.1',
  '198.51.100.7',
  '203.0.113.10',
  '192.88.99.1',
  '::ffff:203.0.113.10',
  '::ffff:c000:201',
  '::ffff:7f00:1',
  '2001:db8::1',
  '2001:db8:ffff::1',
  '3fff::1',
  '3fff:fff:ffff::1',
  '2001::1',
  '2001:2::1',
  '100::1',
  '100:0:0:1::1',
  '5f00::1',
  '4000::1',
  'e000::1',
]

describe('webhook URL policy', () => {
  test('counts loopback, private, link-local, CGNAT, unspecified, multicast and mapped addresses as private', () => {
    for (const address of [
      '127.0.0.1',
      '127.255.0.9',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fd00::1',
      'fe80::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::7f00:1',
      '64:ff9b::7f00:1',
      '64:ff9b:1::a00:1',
      '2002:7f00:1::1',
      'fec0::1',
      'not-an-address',
      '::ffff:999.1.1.1',
    ]) {
      assert.equal(isPrivateAddress(address), true, address)
    }
    for (const address of [
      '8.8.8.8',
      '172.32.0.1',
      '192.0.3.1',
      '203.0.114.1',
      '::ffff:8.8.8.8',
      '::ffff:808:808',
      '2001:4860:4860::8888',
      '2a00:1450:4001::1',
    ]) {
      assert.equal(isPrivateAddress(address), false, address)
    }
  })

  test('counts documentation, deprecated-anycast and other IPv4 and IPv6 ranges that are not global as private', () => {
    for (const address of NOT_GLOBAL) assert.equal(isPrivateAddress(address), true, address)
  })

  test('refuses to subscribe a documentation address unless allowed', async () => {
    for (const url of [
      'https://192.0.2.1/x',
      'https://198.51.100.1/x',
      'https://203.0.113.10/x',
      'https://[2001:db8::1]/x',
      'https://[3fff::1]/x',
    ]) {
      assert.notEqual(await urlProblem(url, false), undefined, url)
      assert.equal(await urlProblem(url, true), undefined, url)
    }
  })

  test('accepts an http or https URL on a public address', async () => {
    assert.equal(await urlProblem('https://8.8.8.8/hooks/plants', false), undefined)
    assert.equal(await urlProblem('http://[2001:4860:4860::8888]:8080/x', false), undefined)
  })

  test('refuses other schemes, credentials, non-URLs and URLs over 2048 characters, saying why to the sender', async () => {
    for (const [url, reason] of [
      ['ftp://8.8.8.8/x', 'must be http or https'],
      ['https://user:pw@8.8.8.8/x', 'must not carry credentials'],
      ['not a url', 'is not a URL'],
      [`https://8.8.8.8/${'x'.repeat(2048)}`, 'is over 2048 characters'],
    ] as const) {
      assert.deepEqual(await urlProblem(url, false), { message: reason, detail: reason }, url)
    }
  })

  test('refuses a URL with a control character, NUL or a lone surrogate, with the rule of the URL schema', async () => {
    const reason =
      'expected text without control characters (U+0000 to U+001F, U+007F to U+009F) or unpaired surrogates'
    for (const url of [
      'https://8.8.8.8/\u0000',
      'https://8.8.8.8/\u001b[2J',
      'https://8.8.8.8/\r\nforged',
      'https://8.8.8.8/\u007f',
      'https://8.8.8.8/\u0085',
      'https://8.8.8.8/\udc00',
    ]) {
      assert.deepEqual(await urlProblem(url, true), { message: reason, detail: reason }, JSON.stringify(url))
    }
    assert.equal(await urlProblem('https://8.8.8.8/\u{1f331}', true), undefined)
  })

  test('refuses private, loopback and link-local hosts, by address or by name, unless allowed', async () => {
    for (const [url, detail] of [
      ['http://127.0.0.1:9/x', 'host 127.0.0.1 is not a public address'],
      ['http://[::1]/x', 'host ::1 is not a public address'],
      ['http://169.254.169.254/latest', 'host 169.254.169.254 is not a public address'],
      ['http://localhost/x', 'host localhost resolves to 127.0.0.1, which is not a public address'],
    ] as const) {
      assert.deepEqual(await urlProblem(url, false), { message: NOT_PUBLIC, detail }, url)
      assert.equal(await urlProblem(url, true), undefined, url)
    }
  })

  test('tells the sender the same for a name that does not resolve and one that resolves to loopback; the detail tells which', async () => {
    // RFC 6761: .invalid never resolves, and localhost resolves to loopback, from /etc/hosts: no test depends on
    // a DNS server's answer.
    const unresolvable = await urlProblem('https://nothing.invalid/hook', false)
    const loopback = await urlProblem('https://localhost/hook', false)
    assert.equal(unresolvable?.message, NOT_PUBLIC)
    assert.equal(loopback?.message, NOT_PUBLIC)
    assert.match(unresolvable!.detail, /^host nothing\.invalid does not resolve \(/)
    assert.equal(loopback!.detail, 'host localhost resolves to 127.0.0.1, which is not a public address')
  })
})

describe('webhook URL policy at connect time', () => {
  // The same BlockList as at subscribe time: a row stored before a range was refused is refused when sent. The
  // literal is refused before any connection, so this test sends nothing anywhere.
  for (const host of ['192.0.2.1', '198.51.100.7', '203.0.113.10', '2001:db8::1', '3fff::1']) {
    test(`refuses to connect to documentation address ${host} unless allowed`, async () => {
      const url = `http://${host.includes(':') ? `[${host}]` : host}:9/hook`
      const result = await send(url, {}, '{}', { timeoutMs: 1000, allowPrivate: false })
      assert.deepEqual(result, {
        ok: false,
        status: null,
        error: `${host} is a private, loopback or link-local address`,
      })
    })
  }
})
