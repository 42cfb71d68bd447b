import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { newSigningSecret } from '../../src/webhooks/events.js'
import { signatureHeaders } from '../../src/webhooks/signature.js'

describe('webhook signatures', () => {
  const secret = newSigningSecret()
  const body = '{"id":9223372036854775807,"name":"Monstera"}'

  test('are accepted by the Standard Webhooks reference library', () => {
    const headers = signatureHeaders(secret, 'msg_abc', body)
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/)
    // verify() parses the body as JSON (losing int64 precision), so the exact text is compared separately.
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body))
  })

  test('fail verification when the body, the id, the timestamp or the secret differs', () => {
    const headers = signatureHeaders(secret, 'msg_abc', body)
    const hook = new Webhook(secret)
    assert.throws(() => hook.verify(body.replace('Monstera', 'Fern'), headers))
    assert.throws(() => hook.verify(body, { ...headers, 'webhook-id': 'msg_other' }))
    const later = String(Number(headers['webhook-timestamp']) + 1)
    assert.throws(() => hook.verify(body, { ...headers, 'webhook-timestamp': later }))
    assert.throws(() => new Webhook(newSigningSecret()).verify(body, headers))
  })

  test('carry a timestamp in seconds that receivers accept as recent', () => {
    const now = Date.now()
    const headers = signatureHeaders(secret, 'msg_abc', body, now)
    assert.equal(headers['webhook-timestamp'], String(Math.floor(now / 1000)))
    const old = signatureHeaders(secret, 'msg_abc', body, now - 3_600_000)
    assert.throws(() => new Webhook(secret).verify(body, old), /too old/i)
  })
})
