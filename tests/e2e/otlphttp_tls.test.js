// tests/e2e/otlphttp_tls.test.js: the otlphttp exporter's `tls` keys
// (upstream's configtls) through libcurl, against HTTPS gateways served by
// node with certificates made here by openssl (a private CA, a second CA):
//  - private CA: tls.ca_file trusts the gateway's certificate, so spans
//    arrive (the system roots would refuse it);
//  - mutual TLS: a gateway that requires a client certificate gets one
//    (cert_file, key_file) and sees it signed by the CA;
//  - wrong CA: the exporter trusts another CA; nothing is sent, and the
//    spans are counted as send_failed{reason="permanent_error"} with a log
//    line saying the certificate is not trusted (no retry storm);
//  - min_version 1.3 against a gateway that offers only TLS 1.2 fails.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver } = require('./lib/config');
const peers = require('./lib/peers');
const { makePki, tlsGateway } = require('./lib/tls');

test('otlphttp tls: private CA, mutual TLS, wrong CA refused as permanent, min_version', async () => {
  await harness('otlphttp_tls', async (h) => {
    const pki = makePki(h.dir);
    const plain = await tlsGateway(pki);
    const mutual = await tlsGateway(pki, { mtls: true });
    const old = await tlsGateway(pki, { maxVersion: 'TLSv1.2' });
    h.onCleanup(() => [plain, mutual, old].forEach((g) => g.server.close()));
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const exporter = (endpoint, tls) => ({
      endpoint, tls,
      retry_on_failure: { initial_interval: '100ms', max_interval: '200ms', max_elapsed_time: '60s' },
      // one request per batch, as the counts below expect: no merging
      sending_queue: { batch: { enabled: false } },
    });
    const config = collectorConfig({
      receivers: { otlp: otlpReceiver({ grpc: grpcPort }) },
      exporters: {
        'otlphttp/private_ca': exporter(`https://localhost:${plain.port}`, { ca_file: pki.ca }),
        'otlphttp/mtls': exporter(`https://127.0.0.1:${mutual.port}`,
          { ca_file: pki.ca, cert_file: pki.clientCert, key_file: pki.clientKey, min_version: '1.2' }),
        'otlphttp/wrong_ca': exporter(`https://localhost:${plain.port}`, { ca_file: pki.otherCa }),
        'otlphttp/tls13': exporter(`https://localhost:${old.port}`, { ca_file: pki.ca, min_version: '1.3' }),
      },
      metricsPort,
      pipelines: {
        traces: {
          receivers: ['otlp'],
          exporters: ['otlphttp/private_ca', 'otlphttp/mtls', 'otlphttp/wrong_ca', 'otlphttp/tls13'],
        },
      },
    });
    const sf = h.track(new Spanfence({ dir: h.dir, config, grpcPort, metricsPort }));
    await sf.start();
    const { results } = await peers.sendSdkSpans({ port: grpcPort, n: 20, batchSize: 10 });
    assert.ok(results.every((r) => r.code === 0), 'the client is answered OK');

    const m = await sf.waitMetrics((x) =>
      x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/private_ca' }) === 20 &&
      x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/mtls' }) === 20 &&
      x.get('otelcol_exporter_send_failed_spans', { exporter: 'otlphttp/wrong_ca', reason: 'permanent_error' }) === 20 &&
      (x.get('otelcol_exporter_send_failed_spans', { exporter: 'otlphttp/tls13' }) ?? 0) === 20,
    'every span sent or failed');
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp/wrong_ca' }), 0);
    assert.equal(m.must('spanfence_exporter_retries', { exporter: 'otlphttp/wrong_ca' }), 0,
      'an untrusted certificate is not retried');
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp/tls13' }), 0);
    assert.equal(plain.requests, 2, 'only the exporter that trusts the CA reached the gateway');
    assert.equal(old.requests, 0, 'min_version 1.3 refused a TLS 1.2 gateway');
    assert.equal(mutual.requests, 2);
    assert.ok(mutual.peers.length > 0 && mutual.peers.every((p) =>
      p.cn === 'spanfence-exporter' && p.issuer === 'spanfence test CA' && p.authorized),
    `the mTLS gateway saw the client certificate: ${JSON.stringify(mutual.peers)}`);
    assert.match(sf.stderr(), /otlphttp\/wrong_ca.*TLS: the gateway's certificate is not trusted/);
    await sf.stop();
    await sleep(0);
  });
});
