import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { newSigningSecret } from '../../src/webhooks/events.js'
import { signatureHeaders } from '../../src/webhooks/signature.js'
import { REPO_ROOT } from '../helpers/server-process.js'

type Verify = (secret: string, headers: Record<string, string | undefined>, body: string) => boolean

describe("docs/webhooks.md's receiver example", () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-verify-'))
  after(() => rmSync(dir, { recursive: true, force: true }))

  /** The TypeScript block of docs/webhooks.md that defines verifyPlantstoreWebhook, loaded as a module. */
  async function example(): Promise<Verify> {
    const page = readFileSync(join(REPO_ROOT, 'docs', 'webhooks.md'), 'utf8')
    const code = [...page.matchAll(/```ts\n([\s\S]*?)```/g)]
      .map((match) => match[1]!)
      .find((block) => block.includes('function verifyPlantstoreWebhook'))
    assert.ok(code, 'docs/webhooks.md shows verifyPlantstoreWebhook')
    const file = join(dir, 'verify.ts')
    writeFileSync(file, code)
    return ((await import(pathToFileURL(file).href)) as { verifyPlantstoreWebhook: Verify }).verifyPlantstoreWebhook
  }

  test('accepts what the service signs and refuses a changed body, another secret or an old timestamp', async () => {
    const verify = await example()
    const secret = newSigningSecret()
    const body = '{"id":9223372036854775807,"name":"Monstera"}'
    const headers = signatureHeaders(secret, 'msg_readme', body)
    assert.equal(verify(secret, headers, body), true)
    assert.equal(verify(secret, headers, body.replace('Monstera', 'Fern')), false)
    assert.equal(verify(newSigningSecret(), headers, body), false)
    assert.equal(verify(secret, signatureHeaders(secret, 'msg_readme', body, Date.now() - 600_000), body), false)
    assert.equal(verify(secret, { ...headers, 'webhook-signature': undefined }, body), false)
  })
})
