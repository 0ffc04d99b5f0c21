// tests/e2e/downstream_503.test.js: the gateway answers 503 to the first
// requests, then 200. spanfence's otlphttp exporter retries with backoff:
// every span arrives, none twice, and the metrics show the retries.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Gateway } = require('./lib/gateway');
const { harness, startPipeline } = require('./lib/spanfence');
const peers = require('./lib/peers');

const N = 20;
const FAILS = 4;

test('503 then 200: all spans arrive exactly once after retries', async () => {
  await harness('downstream_503', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    gw.failFirst(FAILS, 503);
    const sf = await startPipeline(h, gw, {
      retry: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
    });

    const { sent, results } = await peers.sendSdkSpans({ port: sf.grpcPort, n: N, batchSize: 5, prefix: 'retry' });
    assert.deepEqual(results.filter((r) => r.code !== 0), [], 'the collector accepts while the gateway fails');

    await gw.waitForSpans(N);
    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/gateway' }) === N,
      `otelcol_exporter_sent_spans == ${N}`);

    const statuses = gw.requests.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 503).length, FAILS, `gateway statuses ${gw.statusSummary()}`);
    assert.ok(statuses.filter((s) => s === 200).length >= 1);
    assert.ok(m.must('spanfence_exporter_retries', { exporter: 'otlphttp/gateway' }) >= FAILS,
      'every 503 was retried');
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), N);
    assert.equal(m.must('otelcol_exporter_send_failed_spans', { exporter: 'otlphttp/gateway' }), 0);
    assert.equal(m.must('otelcol_exporter_queue_size', { exporter: 'otlphttp/gateway' }), 0);

    await sf.stop();

    assert.deepEqual(gw.duplicates(), []);
    assert.equal(gw.spans.length, N);
    const ids = new Set(gw.spans.map((s) => s.spanId));
    for (const s of sent) assert.ok(ids.has(s.spanContext().spanId), `span '${s.name}' never arrived`);
    // A retried body is the same filtered batch: no secret on the retry path either.
    for (const s of gw.spans) assert.deepEqual(Object.keys(s.attributes).filter((k) => !peers.SPAN_ALLOW.includes(k)), []);
  });
});
