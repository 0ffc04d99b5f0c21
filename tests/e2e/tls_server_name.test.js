// tests/e2e/tls_server_name.test.js: tls.server_name_override on both
// network exporters, against gateways reached at 127.0.0.1 whose
// certificate (signed by a private CA) is valid only for gateway.internal,
// a name nothing resolves:
//  - otlphttp without the override: the certificate does not match
//    127.0.0.1, a permanent error (send_failed{permanent_error}, no retry);
//  - otlphttp with `server_name_override: gateway.internal`: spans arrive;
//    the gateway saw SNI gateway.internal and the Host header of the
//    endpoint (127.0.0.1:PORT), as upstream's Go client sends;
//  - otlp (gRPC) without it: the handshake fails, retried until the
//    retries run out, nothing arrives;
//  - otlp with it: spans arrive; SNI and :authority are gateway.internal
//    (grpc-go takes the authority from the TLS server name too).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver } = require('./lib/config');
const peers = require('./lib/peers');
const { makePki, tlsGateway, tlsGrpcGateway } = require('./lib/tls');

test('tls.server_name_override: SNI and verification use the name, the address stays the endpoint', async () => {
  await harness('tls_server_name', async (h) => {
    const pki = makePki(h.dir);
    const internal = { cert: pki.internalCert, key: pki.internalKey };
    const httpGw = await tlsGateway(pki, internal);
    const grpcGw = await tlsGrpcGateway(pki, internal);
    h.onCleanup(() => { httpGw.server.close(); grpcGw.server.close(); });
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const exporter = (endpoint, tls) => ({
      endpoint, tls,
      retry_on_failure: { initial_interval: '100ms', max_interval: '200ms', max_elapsed_time: '2s' },
      // one request per batch, as the counts below expect: no merging
      sending_queue: { batch: { enabled: false } },
    });
    const config = collectorConfig({
      receivers: { otlp: otlpReceiver({ grpc: grpcPort }) },
      exporters: {
        'otlphttp/plain': exporter(`https://127.0.0.1:${httpGw.port}`, { ca_file: pki.ca }),
        'otlphttp/override': exporter(`https://127.0.0.1:${httpGw.port}`,
          { ca_file: pki.ca, server_name_override: 'gateway.internal' }),
        'otlp/plain': exporter(`127.0.0.1:${grpcGw.port}`, { ca_file: pki.ca }),
        'otlp/override': exporter(`127.0.0.1:${grpcGw.port}`,
          { ca_file: pki.ca, server_name_override: 'gateway.internal' }),
      },
      metricsPort,
      pipelines: {
        traces: { receivers: ['otlp'], exporters: ['otlphttp/plain', 'otlphttp/override', 'otlp/plain', 'otlp/override'] },
      },
    });
    const sf = h.track(new Spanfence({ dir: h.dir, config, grpcPort, metricsPort }));
    await sf.start();
    const { results } = await peers.sendSdkSpans({ port: grpcPort, n: 20, batchSize: 10 });
    assert.ok(results.every((r) => r.code === 0), 'the client is answered OK');

    const m = await sf.waitMetrics((x) =>
      x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/override' }) === 20 &&
      x.get('otelcol_exporter_send_failed_spans', { exporter: 'otlphttp/plain', reason: 'permanent_error' }) === 20 &&
      x.get('otelcol_exporter_sent_spans', { exporter: 'otlp/override' }) === 20 &&
      x.get('otelcol_exporter_send_failed_spans', { exporter: 'otlp/plain', reason: 'retries_exhausted' }) === 20,
    'every span sent or failed');
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp/plain' }), 0);
    assert.equal(m.must('spanfence_exporter_retries', { exporter: 'otlphttp/plain' }), 0,
      'a certificate for another name is not retried');
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlp/plain' }), 0);
    assert.match(sf.stderr(), /otlphttp\/plain.*TLS: the gateway's certificate is not trusted/);

    // Only the exporters with the override got through, each request
    // showing the name in SNI; HTTP keeps the endpoint's Host.
    assert.equal(httpGw.requests, 2);
    assert.deepEqual(httpGw.sni, ['gateway.internal', 'gateway.internal']);
    assert.deepEqual(httpGw.hosts, [`127.0.0.1:${httpGw.port}`, `127.0.0.1:${httpGw.port}`]);
    assert.equal(grpcGw.spans, 20);
    assert.ok(grpcGw.calls >= 2 && grpcGw.sni.every((n) => n === 'gateway.internal'),
      `gRPC SNI: ${JSON.stringify(grpcGw.sni)}`);
    assert.ok(grpcGw.authorities.every((a) => a === 'gateway.internal'),
      `gRPC :authority: ${JSON.stringify(grpcGw.authorities)}`);
    await sf.stop();
    await sleep(0);
  });
});
