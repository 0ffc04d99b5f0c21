// tests/e2e/transports_matrix.test.js: the official JS SDK exporters for
// OTLP/gRPC, OTLP/HTTP protobuf and OTLP/HTTP JSON, each with and without
// gzip, send through spanfence; spanfence exports through its `otlp` gRPC
// exporter (with and without compression, one spanfence run each) to a real
// @grpc/grpc-js OTLP server AND through a `file` exporter (json). Both
// outputs hold exactly the allowlisted keys, every span exactly once, and the
// file's lines decode to the same spans as the server got. Loopback taps
// prove each leg really was (or was not) compressed.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { OtlpGrpcServer } = require('./lib/grpc_server');
const { HttpTap, GrpcTap } = require('./lib/taps');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort, allowlist } = require('./lib/config');
const senders = require('./lib/senders');
const check = require('./lib/check');

const N = 12;   // spans per sender combination

function config({ exporterCompression, upstreamPort, filePath }) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    processors: { 'transform/allowlist': allowlist() },
    exporters: {
      'otlp/upstream': {
        endpoint: `127.0.0.1:${upstreamPort}`,
        tls: { insecure: true },
        compression: exporterCompression,
        sending_queue: { queue_size: 64, num_consumers: 2 },
        retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
      },
      'file/out': { path: filePath, format: 'json', flush_interval: '100ms' },
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], processors: ['transform/allowlist'], exporters: ['otlp/upstream', 'file/out'] },
    },
  });
}

async function runOnce(h, exporterCompression) {
  const server = new OtlpGrpcServer();
  await server.start();
  h.onCleanup(() => server.stop());
  const upTap = new GrpcTap(server.port);   // spanfence -> tap -> server
  await upTap.start();
  h.onCleanup(() => upTap.stop());

  const grpcPort = await freePort();
  const httpPort = await freePort();
  const metricsPort = await freePort();
  const filePath = path.join(h.dir, `out-${exporterCompression}.jsonl`);
  const sf = h.track(new Spanfence({
    dir: h.dir,
    name: `spanfence-${exporterCompression}`,
    config: config({ exporterCompression, upstreamPort: upTap.port, filePath }),
    env: { SF_GRPC_PORT: String(grpcPort), SF_HTTP_PORT: String(httpPort), SF_METRICS_PORT: String(metricsPort) },
    grpcPort,
    metricsPort,
  }));
  await sf.start();

  // Sender -> tap -> spanfence, so the test sees what the SDK put on the wire.
  const inGrpc = new GrpcTap(grpcPort);
  await inGrpc.start();
  h.onCleanup(() => inGrpc.stop());
  const inHttp = new HttpTap(httpPort);
  await inHttp.start();
  h.onCleanup(() => inHttp.stop());

  const sentAll = [];
  const perTransport = { grpc: 0, http: 0 };
  for (const protocol of senders.PROTOCOLS) {
    for (const compression of ['gzip', 'none']) {
      const where = `${protocol}/${compression} -> otlp(${exporterCompression})`;
      const before = { grpc: inGrpc.calls.length, http: inHttp.requests.length };
      const exporter = senders.makeExporter(protocol, { grpcPort: inGrpc.port, httpPort: inHttp.port, compression });
      const { sent, results } = await senders.sendSpans(exporter, { n: N, batchSize: 5, prefix: `${protocol}-${compression}` });
      assert.equal(sent.length, N);
      assert.deepEqual(results.filter((r) => r.code !== 0), [], `${where}: every SDK export call succeeds`);
      assert.equal(results.reduce((a, r) => a + r.spans, 0), N, `${where}: SDK exported every span`);
      sentAll.push(...sent);

      // What the SDK really sent.
      if (protocol === 'grpc') {
        perTransport.grpc += N;
        const calls = inGrpc.calls.slice(before.grpc);
        assert.ok(calls.length >= 3, `${where}: ${calls.length} gRPC calls for ${N} spans in batches of 5`);
        for (const c of calls) {
          assert.equal(c.path, '/opentelemetry.proto.collector.trace.v1.TraceService/Export');
          assert.equal(c.status, 0, `${where}: spanfence answered grpc-status ${c.status}`);
          assert.equal(c.frames.length, 1, `${where}: one message per unary call`);
          assert.equal(c.frames[0].compressed, compression === 'gzip' ? 1 : 0, `${where}: compressed flag`);
          assert.equal(c.encoding, compression === 'gzip' ? 'gzip' : 'identity', `${where}: grpc-encoding`);
        }
      } else {
        perTransport.http += N;
        const reqs = inHttp.requests.slice(before.http);
        assert.ok(reqs.length >= 3, `${where}: ${reqs.length} HTTP requests for ${N} spans in batches of 5`);
        for (const r of reqs) {
          assert.equal(r.method, 'POST');
          assert.equal(r.path, '/v1/traces');
          assert.equal(r.status, 200, `${where}: spanfence answered ${r.status}`);
          assert.equal(r.headers['content-type'], protocol === 'http-json' ? 'application/json' : 'application/x-protobuf');
          assert.equal(r.headers['content-encoding'], compression === 'gzip' ? 'gzip' : undefined, `${where}: content-encoding`);
          if (compression === 'gzip') assert.deepEqual([...r.body.subarray(0, 2)], [0x1f, 0x8b], `${where}: body is gzip`);
        }
      }
    }
  }

  const total = sentAll.length;
  assert.equal(total, N * 6);
  await server.waitForSpans(total);
  const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlp/upstream' }) === total &&
      x.get('otelcol_exporter_sent_spans', { exporter: 'file/out' }) === total,
    `both exporters sent ${total}`);
  assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), perTransport.grpc);
  assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'http' }), perTransport.http);
  assert.equal(m.must('otelcol_receiver_refused_spans', { receiver: 'otlp' }), 0);
  for (const exporter of ['otlp/upstream', 'file/out']) {
    assert.equal(m.must('otelcol_exporter_send_failed_spans', { exporter }), 0, `${exporter} send_failed`);
    assert.equal(m.must('otelcol_exporter_enqueue_failed_spans', { exporter }), 0, `${exporter} enqueue_failed`);
    assert.equal(m.must('spanfence_exporter_queued_spans', { exporter }), 0, `${exporter} queued`);
  }
  assert.equal(m.must('spanfence_exporter_retries', { exporter: 'otlp/upstream' }), 0);

  await sf.stop();

  // The otlp (gRPC) exporter's leg.
  assert.ok(upTap.calls.length >= 1);
  for (const c of upTap.calls) {
    assert.equal(c.path, '/opentelemetry.proto.collector.trace.v1.TraceService/Export');
    assert.equal(c.status, 0);
    assert.ok(c.frames.length === 1 && !c.frames[0].truncated, `exporter call frames ${JSON.stringify(c.frames)}`);
    assert.equal(c.frames[0].compressed, exporterCompression === 'gzip' ? 1 : 0, 'exporter compressed flag');
    assert.equal(c.encoding, exporterCompression === 'gzip' ? 'gzip' : 'identity', 'exporter grpc-encoding');
  }
  for (const c of server.calls) assert.equal(c.code, 0, c.error || '');
  check.assertFiltered(sentAll, server.spans, `grpc server (otlp ${exporterCompression})`);

  // The file exporter's leg: same spans, field for field.
  const { records, lines } = senders.jsonLinesRecords(fs.readFileSync(filePath, 'utf8'));
  assert.ok(lines >= 1);
  check.assertFiltered(sentAll, records, `file ${path.basename(filePath)}`);
  check.assertSameRecords(server.spans, records, 'file json lines decode to the spans the gRPC server got');
  for (const s of records) assert.equal(s.resource['sender.prefix'] + ' ' + s.name.split(' ')[1], s.name);
}

test('3 protocols x gzip on/off in, otlp (gRPC) exporter (gzip and none) + file json out', async () => {
  await harness('transports_matrix', async (h) => {
    await runOnce(h, 'gzip');
    await runOnce(h, 'none');
  });
});
