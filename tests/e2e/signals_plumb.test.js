// tests/e2e/signals_plumb.test.js: the first end-to-end proof that logs and
// metrics run through spanfence as traces do (issue #25): an OTLP log
// record and a metric point, each sent over gRPC (LogsService /
// MetricsService) and over HTTP (/v1/logs, /v1/metrics, protobuf), reach
// stand-in gateways through their own exporters (logs: otlphttp to
// /v1/logs; metrics: otlp over gRPC, MetricsService/Export), never the
// traces exporter; each signal is counted under upstream's names and its
// accounting adds up. The requests are built byte by byte here (no SDK);
// sig-tests' tests drive the official SDK and decode with the official
// protos.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');

const deps = require('./lib/deps');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const proto = require('./lib/proto');
const { rawCall } = require('./lib/grpc_raw');

const grpc = deps.grpc();

// ---- protobuf bytes, by hand ----------------------------------------------

const { varintField, lenField: len, fixed64Field: fixed64 } = proto;
const str = (num, s) => len(num, Buffer.from(s));

// ExportLogsServiceRequest { resource_logs { scope_logs { log_records {
//   time_unix_nano, severity_number, body { string_value } } } } }
function logsRequest(text) {
  const record = Buffer.concat([fixed64(1, 1700000000000000000n), varintField(2, 9),
    len(5, str(1, text))]);
  return len(1, len(2, len(2, record)));
}

// ExportMetricsServiceRequest { resource_metrics { scope_metrics { metrics {
//   name, gauge { data_points { time_unix_nano, as_int } } } } } }
function metricsRequest(name, value) {
  const point = Buffer.concat([fixed64(3, 1700000000000000000n), fixed64(6, value)]);
  const metric = Buffer.concat([str(1, name), len(5, len(1, point))]);
  return len(1, len(2, len(2, metric)));
}

// ---- stand-in gateways ----------------------------------------------------

// OTLP/HTTP: every request's path and body (gunzipped by the exporter's
// choice: compression none below), answered 200 with an empty response.
function httpSink() {
  const got = [];
  const server = http.createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      got.push({ path: req.url, body: Buffer.concat(parts) });
      res.writeHead(200, { 'Content-Type': 'application/x-protobuf' });
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    got, port: server.address().port, close: () => new Promise((r) => server.close(r)),
  })));
}

// OTLP/gRPC: every call's method and request bytes, for the three
// services (a call to the wrong one is recorded under its method too).
function grpcSink() {
  const got = [];
  const server = new grpc.Server();
  const raw = (path) => ({
    path, requestStream: false, responseStream: false,
    requestSerialize: (b) => b, requestDeserialize: (b) => b,
    responseSerialize: (b) => b, responseDeserialize: (b) => b,
  });
  for (const [svc, pkg] of [['TraceService', 'trace'], ['LogsService', 'logs'], ['MetricsService', 'metrics']]) {
    const path = `/opentelemetry.proto.collector.${pkg}.v1.${svc}/Export`;
    server.addService({ Export: raw(path) }, {
      Export: (call, cb) => { got.push({ path, body: call.request }); cb(null, Buffer.alloc(0)); },
    });
  }
  return new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0',
    grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve({
      got, port, close: () => Promise.resolve(server.forceShutdown()),
    }))));
}

function config() {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    processors: { memory_limiter: { check_interval: '1s', limit_mib: 256 }, batch: null },
    exporters: {
      'otlphttp/traces': otlphttp('http://127.0.0.1:${env:SF_HTTP_SINK}'),
      'otlphttp/logs': otlphttp('http://127.0.0.1:${env:SF_HTTP_SINK}'),
      'otlp/metrics': { endpoint: '127.0.0.1:${env:SF_GRPC_SINK}', tls: { insecure: true }, compression: 'none' },
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], exporters: ['otlphttp/traces'] },
      logs: {
        receivers: ['otlp'],
        processors: ['memory_limiter', 'batch'],
        exporters: ['otlphttp/logs'],
      },
      metrics: {
        receivers: ['otlp'],
        processors: ['memory_limiter', 'batch'],
        exporters: ['otlp/metrics'],
      },
    },
  });
}

const has = (buf, text) => buf.includes(Buffer.from(text));

test('a log and a metric over gRPC and HTTP reach their own gateways through their own exporters', async () => {
  await harness('signals_plumb', async (h) => {
    const hs = await httpSink();
    const gs = await grpcSink();
    h.onCleanup(() => hs.close());
    h.onCleanup(() => gs.close());
    const ports = {
      SF_GRPC_PORT: await freePort(), SF_HTTP_PORT: await freePort(),
      SF_METRICS_PORT: await freePort(), SF_HTTP_SINK: hs.port, SF_GRPC_SINK: gs.port,
    };
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(), env, grpcPort: ports.SF_GRPC_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    await sf.start();

    // gRPC: LogsService and MetricsService are served (the pipelines list the receiver)
    const l1 = await rawCall(ports.SF_GRPC_PORT, '/opentelemetry.proto.collector.logs.v1.LogsService/Export',
      logsRequest('log-over-grpc'));
    assert.equal(l1.err, null, l1.err && l1.err.details);
    const m1 = await rawCall(ports.SF_GRPC_PORT, '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export',
      metricsRequest('sglang:metric_over_grpc', 7));
    assert.equal(m1.err, null, m1.err && m1.err.details);

    // HTTP protobuf
    const base = `http://127.0.0.1:${ports.SF_HTTP_PORT}`;
    let r = await fetch(`${base}/v1/logs`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-protobuf' }, body: logsRequest('log-over-http'),
    });
    assert.equal(r.status, 200, await r.text());
    r = await fetch(`${base}/v1/metrics`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-protobuf' },
      body: metricsRequest('sglang:metric_over_http', 9),
    });
    assert.equal(r.status, 200, await r.text());

    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_log_records', { exporter: 'otlphttp/logs' }) === 2 &&
      x.get('otelcol_exporter_sent_metric_points', { exporter: 'otlp/metrics' }) === 2, 'logs and metrics exported');

    // logs arrived at /v1/logs only, metrics on MetricsService/Export only
    const logBodies = hs.got.filter((g) => g.path === '/v1/logs').map((g) => g.body);
    assert.ok(logBodies.some((b) => has(b, 'log-over-grpc')), 'the gRPC log at /v1/logs');
    assert.ok(logBodies.some((b) => has(b, 'log-over-http')), 'the HTTP log at /v1/logs');
    assert.deepEqual(hs.got.filter((g) => g.path !== '/v1/logs').map((g) => g.path), []);
    const metricBodies = gs.got.filter((g) => g.path.endsWith('MetricsService/Export')).map((g) => g.body);
    assert.ok(metricBodies.some((b) => has(b, 'sglang:metric_over_grpc')));
    assert.ok(metricBodies.some((b) => has(b, 'sglang:metric_over_http')));
    assert.deepEqual(gs.got.filter((g) => !g.path.endsWith('MetricsService/Export')).map((g) => g.path), []);

    // upstream's names, per signal and transport; each signal adds up
    const acc = (name, transport) => m.must(name, { receiver: 'otlp', transport });
    assert.equal(acc('otelcol_receiver_accepted_log_records', 'grpc'), 1);
    assert.equal(acc('otelcol_receiver_accepted_log_records', 'http'), 1);
    assert.equal(acc('otelcol_receiver_accepted_metric_points', 'grpc'), 1);
    assert.equal(acc('otelcol_receiver_accepted_metric_points', 'http'), 1);
    assert.equal(acc('otelcol_receiver_accepted_spans', 'grpc'), 0);
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp/traces' }), 0);
    assert.equal(m.must('otelcol_processor_incoming_items', { processor: 'batch', otel_signal: 'logs' }), 2);
    assert.equal(m.must('otelcol_processor_incoming_items', { processor: 'batch', otel_signal: 'metrics' }), 2);
    const status = await (await fetch(`http://127.0.0.1:${ports.SF_METRICS_PORT}/status`)).json();
    assert.equal(status.log_records.accepted, 2);
    assert.equal(status.log_records.exported, 2);
    assert.equal(status.log_records.lost, 0);
    assert.equal(status.metric_points.accepted, 2);
    assert.equal(status.metric_points.exported, 2);
    assert.deepEqual(status.pipelines.map((p) => p.signal).sort(), ['logs', 'metrics', 'traces']);
    await sf.stop();
  });
});
