import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { isPrivateAddress, urlProblem } from '../../src/webhooks/url-policy.js'

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
    ]) {
      assert.equal(isPrivateAddress(address), true, address)
    }
    for (const address of ['203.0.113.10', '8.8.8.8', '172.32.0.1', '2001:db8::1', '::ffff:8.8.8.8']) {
      assert.equal(isPrivateAddress(address), false, address)
    }
  })

  test('accepts an http or https URL on a public address', async () => {
    assert.equal(await urlProblem('https://203.0.113.10/hooks/plants', false), undefined)
    assert.equal(await urlProblem('http://[2001:db8::1]:8080/x', false), undefined)
  })

  test('refuses other schemes, credentials, non-URLs and URLs over 2048 characters', async () => {
    assert.match((await urlProblem('ftp://203.0.113.10/x', false))!, /http or https/)
    assert.match((await urlProblem('https://user:pw@203.0.113.10/x', false))!, /credentials/)
    assert.match((await urlProblem('not a url', false))!, /not a URL/)
    assert.match((await urlProblem(`https://203.0.113.10/${'x'.repeat(2048)}`, false))!, /2048/)
  })

  test('refuses a URL with a control character, NUL or a lone surrogate, with the rule of the URL schema', async () => {
    for (const url of [
      'https://8.8.8.8/\u0000',
      'https://8.8.8.8/\u001b[2J',
      'https://8.8.8.8/\r\nforged',
      'https://8.8.8.8/\u007f',
      'https://8.8.8.8/\u0085',
      'https://8.8.8.8/\udc00',
    ]) {
      assert.equal(
        await urlProblem(url, true),
        'expected text without control characters (U+0000 to U+001F, U+007F to U+009F) or unpaired surrogates',
        JSON.stringify(url),
      )
    }
    assert.equal(await urlProblem('https://8.8.8.8/\u{1f331}', true), undefined)
  })

  test('refuses private, loopback and link-local hosts, by address or by name, unless allowed', async () => {
    for (const url of [
      'http://127.0.0.1:9/x',
      'http://[::1]/x',
      'http://169.254.169.254/latest',
      'http://localhost/x',
    ]) {
      assert.match((await urlProblem(url, false))!, /private, loopback or link-local/, url)
      assert.equal(await urlProblem(url, true), undefined, url)
    }
  })
})
