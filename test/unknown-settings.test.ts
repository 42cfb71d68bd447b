import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { misspeltDatabaseUrl, unknownSettings } from '../src/unknown-settings.js'

describe('unknown settings', () => {
  test('names a misspelt PLANTSTORE_ variable and the setting it most likely meant', () => {
    assert.deepEqual(unknownSettings({ PLANTSTORE_RATELIMIT: '10', PLANTSTORE_RATE_LIMT: '10' }), [
      'PLANTSTORE_RATELIMIT: not a setting; did you mean PLANTSTORE_RATE_LIMIT?',
      'PLANTSTORE_RATE_LIMT: not a setting; did you mean PLANTSTORE_RATE_LIMIT?',
    ])
  })

  test('suggests an unprefixed setting given the prefix by mistake', () => {
    assert.deepEqual(unknownSettings({ PLANTSTORE_PORT: '3000', PLANTSTORE_DATABASE_URL: 'sqlite:x.db' }), [
      'PLANTSTORE_DATABASE_URL: not a setting; did you mean DATABASE_URL?',
      'PLANTSTORE_PORT: not a setting; did you mean PORT?',
    ])
  })

  test('warns of a PLANTSTORE_ variable close to nothing, pointing to the list', () => {
    assert.deepEqual(unknownSettings({ PLANTSTORE_COLOUR: 'green' }), [
      'PLANTSTORE_COLOUR: not a setting (docs/configuration.md lists them)',
    ])
  })

  test('warns of an unprefixed variable one or two slips from a setting', () => {
    assert.deepEqual(unknownSettings({ DATABSE_URL: 'sqlite:x.db', HTTP_MAX_CONECTIONS: '5', LOG_LEVL: 'debug' }), [
      'DATABSE_URL: not a setting; did you mean DATABASE_URL?',
      'HTTP_MAX_CONECTIONS: not a setting; did you mean HTTP_MAX_CONNECTIONS?',
      'LOG_LEVL: not a setting; did you mean LOG_LEVEL?',
    ])
  })

  test("is silent on every setting, the suite's and benchmark's switches, and a shell's own variables", () => {
    const env = {
      PLANTSTORE_RATE_LIMIT: '10',
      DATABASE_URL: 'sqlite:x.db',
      PORT: '3000',
      HOST: '127.0.0.1',
      PLANTSTORE_TEST_POSTGRES_URL: 'postgres://127.0.0.1/test',
      PLANTSTORE_BENCH_TOKEN: 'x',
      HOME: '/root',
      PATH: '/usr/bin',
      PWD: '/',
      HOSTNAME: 'vm',
      HTTP_PROXY: 'http://127.0.0.1:3128',
      HTTPS_PROXY: 'http://127.0.0.1:3128',
      NODE_ENV: 'production',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
    }
    assert.deepEqual(unknownSettings(env), [])
  })

  test('is silent on what Kubernetes sets for a Service named plantstore, and only then on PLANTSTORE_PORT', () => {
    const env = {
      PLANTSTORE_SERVICE_HOST: '10.0.0.7',
      PLANTSTORE_SERVICE_PORT: '8080',
      PLANTSTORE_SERVICE_PORT_HTTP: '8080',
      PLANTSTORE_PORT: 'tcp://10.0.0.7:8080',
      PLANTSTORE_PORT_8080_TCP: 'tcp://10.0.0.7:8080',
      PLANTSTORE_PORT_8080_TCP_ADDR: '10.0.0.7',
      PLANTSTORE_PORT_8080_TCP_PORT: '8080',
      PLANTSTORE_PORT_8080_TCP_PROTO: 'tcp',
    }
    assert.deepEqual(unknownSettings(env), [])
    assert.deepEqual(unknownSettings({ PLANTSTORE_PORT: '3000' }), [
      'PLANTSTORE_PORT: not a setting; did you mean PORT?',
    ])
  })

  test('leaves out the variable it is told to', () => {
    assert.deepEqual(unknownSettings({ DATABSE_URL: 'sqlite:x.db', LOG_LEVL: 'debug' }, 'DATABSE_URL'), [
      'LOG_LEVL: not a setting; did you mean LOG_LEVEL?',
    ])
  })
})

describe('a misspelt DATABASE_URL', () => {
  test('is the variable meant for DATABASE_URL, with or without the prefix, while DATABASE_URL is unset or empty', () => {
    assert.equal(misspeltDatabaseUrl({ DATABSE_URL: 'sqlite:x.db', LOG_LEVL: 'debug' }), 'DATABSE_URL')
    assert.equal(misspeltDatabaseUrl({ PLANTSTORE_DATABASE_URL: 'postgres://127.0.0.1/x' }), 'PLANTSTORE_DATABASE_URL')
    assert.equal(misspeltDatabaseUrl({ DATABASE_URI: 'sqlite:x.db', DATABASE_URL: '' }), 'DATABASE_URI')
  })

  test('is none when DATABASE_URL is set, or when the slips are of other settings', () => {
    assert.equal(misspeltDatabaseUrl({ DATABSE_URL: 'sqlite:x.db', DATABASE_URL: 'sqlite:y.db' }), undefined)
    assert.equal(misspeltDatabaseUrl({ LOG_LEVL: 'debug', PLANTSTORE_COLOUR: 'green', HOME: '/root' }), undefined)
  })
})
