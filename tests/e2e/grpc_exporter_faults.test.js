// tests/e2e/grpc_exporter_faults.test.js: faults downstream of spanfence's
// otlp (gRPC) exporter, played by a real @grpc/grpc-js OTLP server:
//   1. UNAVAILABLE for the first calls, then OK: every span arrives exactly
//      once and the retries are counted;
//   2. server down (nothing listening), then started on the same port: the
//      queued spans arrive;
//   3. INVALID_ARGUMENT (permanent): the spans are counted as
//      send_failed{reason="permanent_error"} and never retried.
// After each phase /metrics satisfies accepted == sent + send_failed + queued.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { OtlpGrpcServer, status: S } = require('./lib/grpc_server');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort, allowlist } = require('./lib/config');
const peers = require('./lib/peers');

const EXP = { exporter: 'otlp/upstream' };
const RCV = { receiver: 'otlp', transport: 'grpc' };

function config(upstreamPort) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC') }) },
    processors: {
      'transform/allowlist': allowlist({ span: ['gen_ai.request.id'] }),
    },
    exporters: {
      'otlp/upstream': {
        endpoint: `127.0.0.1:${upstreamPort}`,
        tls: { insecure: true },
        compression: 'gzip',
        timeout: '2s',
        // one call per batch, as the counts below expect: no merging
        sending_queue: { queue_size: 100, num_consumers: 2, batch: { enabled: false } },
        retry_on_failure: {
          initial_interval: '100ms',
          max_interval: '300ms',
          randomization_factor: 0,
          max_elapsed_time: '120s',
        },
      },
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], processors: ['transform/allowlist'], exporters: ['otlp/upstream'] },
    },
  });
}

function counts(m) {
  return {
    accepted: m.must('otelcol_receiver_accepted_spans', RCV),
    sent: m.must('otelcol_exporter_sent_spans', EXP),
    failed: m.must('otelcol_exporter_send_failed_spans', EXP),
    permanent: m.must('otelcol_exporter_send_failed_spans', { ...EXP, reason: 'permanent_error' }),
    queued: m.must('spanfence_exporter_queued_spans', EXP),
    retries: m.must('spanfence_exporter_retries', EXP),
  };
}

function assertInvariant(c, phase) {
  assert.equal(c.accepted, c.sent + c.failed + c.queued, `${phase}: accepted == sent + send_failed + queued: ${JSON.stringify(c)}`);
}

// `batches` separate Export calls of `per` spans each; all must be accepted.
async function sendBatches(client, batches, per, prefix) {
  const ids = [];
  for (let i = 0; i < batches; i++) {
    const { bytes, spanIds } = peers.serializedSpans(per, `${prefix}${i}`);
    const r = await client.call(bytes);
    assert.equal(r.code, S.OK, `${prefix} export ${i}: ${r.code} '${r.details}'`);
    ids.push(...spanIds);
  }
  return ids;
}

test('otlp (gRPC) exporter: UNAVAILABLE then OK, server down then up, permanent INVALID_ARGUMENT', async () => {
  await harness('grpc_exporter_faults', async (h) => {
    const server = new OtlpGrpcServer();
    await server.start();
    h.onCleanup(() => server.stop());
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config(server.port),
      env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort) },
      grpcPort,
      metricsPort,
    }));
    await sf.start();
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());

    // ---- 1. UNAVAILABLE x FAILS, then OK --------------------------------
    const FAILS = 3;
    server.failFirst(FAILS, S.UNAVAILABLE);
    const ids1 = await sendBatches(client, 4, 5, 'unavail');
    await server.waitForSpans(ids1.length);
    let m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === ids1.length,
      `sent == ${ids1.length}`);
    let c = counts(m);
    assert.equal(server.calls.filter((x) => x.code === S.UNAVAILABLE).length, FAILS, `server codes ${server.codeSummary()}`);
    assert.equal(server.calls.filter((x) => x.code === S.OK).length, 4, `one OK call per batch: ${server.codeSummary()}`);
    assert.equal(c.retries, FAILS, 'every UNAVAILABLE was retried once');
    assert.deepEqual({ accepted: c.accepted, sent: c.sent, failed: c.failed, queued: c.queued },
      { accepted: 20, sent: 20, failed: 0, queued: 0 });
    assertInvariant(c, 'phase 1');
    assert.deepEqual(server.duplicates(), []);
    assert.deepEqual(server.spans.map((s) => s.spanId).sort(), [...ids1].sort());
    for (const s of server.spans) assert.deepEqual(Object.keys(s.attributes), ['gen_ai.request.id']);

    // ---- 2. server down, then back on the same port ---------------------
    await server.stop();
    const callsBefore = server.calls.length;
    const ids2 = await sendBatches(client, 3, 4, 'down');
    // The spans are accepted and held: queued (or in backoff), not sent, not failed.
    m = await sf.waitMetrics((x) => x.get('otelcol_receiver_accepted_spans', RCV) === 32 &&
      x.get('spanfence_exporter_retries', EXP) >= FAILS + 3, 'phase 2: every batch accepted and retried at least once');
    c = counts(m);
    assert.equal(c.sent, 20, 'nothing is sent while the server is down');
    assert.equal(c.failed, 0, 'nothing is given up on while the server is down');
    assert.equal(c.queued, ids2.length, 'the spans of phase 2 are held');
    assertInvariant(c, 'phase 2 (down)');
    assert.equal(server.calls.length, callsBefore);

    await server.start();
    await server.waitForSpans(ids1.length + ids2.length, 60000);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === 32 &&
      x.get('spanfence_exporter_queued_spans', EXP) === 0, 'phase 2: sent == 32, queued == 0', 60000);
    c = counts(m);
    assert.deepEqual({ accepted: c.accepted, sent: c.sent, failed: c.failed, queued: c.queued },
      { accepted: 32, sent: 32, failed: 0, queued: 0 });
    assertInvariant(c, 'phase 2 (up)');
    assert.deepEqual(server.duplicates(), []);
    const got2 = new Set(server.spans.map((s) => s.spanId));
    for (const id of ids2) assert.ok(got2.has(id), `queued span ${id} lost`);

    // ---- 3. permanent error: INVALID_ARGUMENT ---------------------------
    const retriesBefore = c.retries;
    const spansBefore = server.spans.length;
    const callsBefore3 = server.calls.length;
    server.setCode(S.INVALID_ARGUMENT);
    const ids3 = await sendBatches(client, 3, 5, 'perm');
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_send_failed_spans', { ...EXP, reason: 'permanent_error' }) === ids3.length,
      `send_failed{permanent_error} == ${ids3.length}`);
    c = counts(m);
    assert.equal(c.permanent, ids3.length);
    assert.equal(c.failed, ids3.length, 'permanent_error is the only failure reason');
    assert.equal(c.retries, retriesBefore, 'a permanent error is not retried');
    assert.deepEqual({ accepted: c.accepted, sent: c.sent, queued: c.queued }, { accepted: 47, sent: 32, queued: 0 });
    assertInvariant(c, 'phase 3');
    const calls3 = server.calls.slice(callsBefore3);
    assert.equal(calls3.length, 3, `one call per batch, no retries: ${JSON.stringify(calls3.map((x) => x.code))}`);
    for (const x of calls3) assert.equal(x.code, S.INVALID_ARGUMENT);
    assert.equal(server.spans.length, spansBefore, 'the server accepted nothing in phase 3');

    // The exporter still works once the server answers OK again.
    server.setCode(S.OK);
    const ids4 = await sendBatches(client, 1, 3, 'after');
    await server.waitForSpans(spansBefore + 3);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === 35, 'sent == 35');
    c = counts(m);
    assertInvariant(c, 'after');

    await sf.stop();
    assert.deepEqual(server.duplicates(), []);
    const all = new Set(server.spans.map((s) => s.spanId));
    for (const id of [...ids1, ...ids2, ...ids4]) assert.ok(all.has(id), `span ${id} lost`);
    for (const id of ids3) assert.ok(!all.has(id), `refused span ${id} arrived`);
  });
});
