// tests/e2e/allowlist_grpc.test.js: the official JS SDK sends LLM-serving
// spans with allowlisted and secret attributes over OTLP/gRPC through
// spanfence to a mock OTLP/HTTP gateway; exactly the allowlisted keys arrive,
// once per span, with status messages blanked and the removals counted.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Gateway } = require('./lib/gateway');
const { harness, startPipeline } = require('./lib/spanfence');
const peers = require('./lib/peers');

const N = 50;

const pick = (attrs, keys) => Object.fromEntries(keys.filter((k) => k in attrs).map((k) => [k, attrs[k]]));

test('allowlisted attributes only, every span once, metrics agree', async () => {
  await harness('allowlist_grpc', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const sf = await startPipeline(h, gw);

    const { sent, results } = await peers.sendSdkSpans({ port: sf.grpcPort, n: N, batchSize: 10 });
    assert.equal(sent.length, N);
    assert.deepEqual(results.filter((r) => r.code !== 0), [], 'every SDK export call succeeds');
    assert.equal(results.reduce((a, r) => a + r.spans, 0), N);

    await gw.waitForSpans(N);
    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/gateway' }) === N,
      `otelcol_exporter_sent_spans == ${N}`);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), N);
    assert.equal(m.must('otelcol_receiver_refused_spans', { receiver: 'otlp' }), 0);
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp/gateway' }), N);
    assert.equal(m.must('otelcol_exporter_send_failed_spans', { exporter: 'otlphttp/gateway' }), 0);
    assert.equal(m.must('otelcol_exporter_enqueue_failed_spans', { exporter: 'otlphttp/gateway' }), 0);
    assert.equal(m.must('otelcol_exporter_queue_capacity', { exporter: 'otlphttp/gateway' }), 32);
    assert.equal(m.must('otelcol_processor_incoming_items', { processor: 'transform/allowlist' }), N);

    await sf.stop();   // SIGTERM drains; exit code 0

    // Exactly once each, nothing extra.
    assert.deepEqual(gw.duplicates(), []);
    assert.equal(gw.spans.length, N);
    for (const r of gw.requests) {
      assert.equal(r.method, 'POST');
      assert.equal(r.path, '/v1/traces');
      assert.equal(r.headers['content-type'], 'application/x-protobuf');
      assert.equal(r.headers['content-encoding'], 'gzip');
      assert.equal(r.status, 200, r.error || '');
    }

    const byId = new Map(gw.spans.map((s) => [s.spanId, s]));
    for (const s of sent) {
      const id = s.spanContext().spanId;
      const got = byId.get(id);
      assert.ok(got, `span '${s.name}' (${id}) never arrived`);
      assert.equal(got.traceId, s.spanContext().traceId);
      assert.equal(got.name, s.name);
      assert.equal(got.kind, s.kind + 1);

      const keep = pick(s.attributes, peers.SPAN_ALLOW);
      assert.deepEqual(got.attributes, keep, `span '${s.name}' attributes`);
      const removed = Object.keys(s.attributes).length - Object.keys(keep).length;
      assert.ok(removed >= 5, `test data: span '${s.name}' has secrets to remove`);
      assert.equal(got.droppedAttributesCount, s.droppedAttributesCount + removed, `span '${s.name}' dropped_attributes_count`);

      assert.equal(got.events.length, s.events.length, `span '${s.name}' events`);
      s.events.forEach((e, i) => {
        const ge = got.events[i];
        assert.equal(ge.name, e.name);
        const ekeep = pick(e.attributes, peers.EVENT_ALLOW);
        assert.deepEqual(ge.attributes, ekeep, `span '${s.name}' event '${e.name}' attributes`);
        const eremoved = Object.keys(e.attributes).length - Object.keys(ekeep).length;
        assert.equal(ge.droppedAttributesCount, (e.droppedAttributesCount || 0) + eremoved,
          `span '${s.name}' event '${e.name}' dropped_attributes_count`);
      });

      assert.equal(got.status.code, s.status.code, `span '${s.name}' status code`);
      assert.equal(got.status.message, '', `span '${s.name}' status message`);
      assert.deepEqual(got.resource, s.resource.attributes, 'resource attributes pass unchanged');
    }
    assert.ok(sent.some((s) => s.status.code === 2 && s.status.message), 'test data has error messages');

    // Belt and braces: no secret reached the gateway in any field.
    const all = JSON.stringify(gw.spans, (k, v) => (typeof v === 'bigint' ? v.toString() : v));
    for (const secret of ['secret', '@example.com', 'token=', 'tell me']) {
      assert.ok(!all.includes(secret), `'${secret}' reached the gateway`);
    }
  });
});
