// tests/e2e/other_signals.test.js: OTLP metrics and logs sent to the shared
// otlp receiver when no metrics or logs pipeline lists it. As upstream's
// receiver, which serves a signal only for the pipelines of it, such
// exports are refused with gRPC UNIMPLEMENTED and HTTP 404 (codes OTLP
// clients do not retry), each saying why, in the request's encoding, and
// counted in spanfence_receiver_unexported_requests{signal}; never
// answered as accepted. Traces still flow.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const deps = require('./lib/deps');
const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort } = require('./lib/config');
const peers = require('./lib/peers');
const { rawCall } = require('./lib/grpc_raw');

const grpc = deps.grpc();

function config() {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    exporters: { otlphttp: { endpoint: `http://127.0.0.1:${envPort('GATEWAY')}` } },
    metricsPort: envPort('METRICS'),
    pipelines: { traces: { receivers: ['otlp'], exporters: ['otlphttp'] } },
  });
}

test('metrics and logs to a receiver no pipeline of theirs lists: refused with why and counted, never accepted', async () => {
  await harness('other_signals', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = {
      SF_GRPC_PORT: await freePort(), SF_HTTP_PORT: await freePort(),
      SF_METRICS_PORT: await freePort(), SF_GATEWAY_PORT: gw.port,
    };
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(), env, grpcPort: ports.SF_GRPC_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    await sf.start();

    // gRPC metrics: no metrics pipeline
    const m1 = await rawCall(ports.SF_GRPC_PORT,
      '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export', Buffer.from([0x0a, 0x00]));
    assert.equal(m1.err && m1.err.code, grpc.status.UNIMPLEMENTED);
    assert.match(m1.err.details, /no metrics pipeline lists this receiver/);
    // gRPC logs: no logs pipeline
    const l1 = await rawCall(ports.SF_GRPC_PORT,
      '/opentelemetry.proto.collector.logs.v1.LogsService/Export', Buffer.alloc(0));
    assert.equal(l1.err && l1.err.code, grpc.status.UNIMPLEMENTED);
    assert.match(l1.err.details, /no logs pipeline lists this receiver/);
    // an unknown method is still not served
    const u = await rawCall(ports.SF_GRPC_PORT, '/x.Y/Z', Buffer.alloc(0));
    assert.equal(u.err && u.err.code, grpc.status.UNIMPLEMENTED);

    // HTTP metrics, protobuf and JSON: 404 saying why
    const base = `http://127.0.0.1:${ports.SF_HTTP_PORT}`;
    let r = await fetch(`${base}/v1/metrics`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-protobuf' }, body: Buffer.from([0x0a, 0x00]),
    });
    assert.equal(r.status, 404);
    r = await fetch(`${base}/v1/metrics`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"resourceMetrics":[]}',
    });
    assert.equal(r.status, 404);
    assert.match(r.headers.get('content-type'), /application\/json/);     // JSON asked, JSON answered
    assert.match(JSON.parse(await r.text()).message, /no metrics pipeline lists this receiver/);
    r = await fetch(`${base}/v1/logs`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"resourceLogs":[]}',
    });
    assert.equal(r.status, 404);
    assert.match(await r.text(), /no logs pipeline lists this receiver/);

    // traces still flow
    const { results } = await peers.sendSdkSpans({ port: ports.SF_GRPC_PORT, n: 10, batchSize: 10 });
    assert.ok(results.every((x) => x.code === 0));

    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp' }) === 10,
      'traces exported');
    const un = (transport, signal) => m.must('spanfence_receiver_unexported_requests', { receiver: 'otlp', transport, signal });
    assert.equal(un('grpc', 'metrics'), 1);
    assert.equal(un('http', 'metrics'), 2);
    assert.equal(un('grpc', 'logs'), 1);
    assert.equal(un('http', 'logs'), 1);
    await sf.stop();
  });
});
