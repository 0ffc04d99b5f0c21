// tests/e2e/batch_metrics.test.js: the batch processor's series with
// upstream v0.120's names (otelcol_processor_batch_*), read from a pull
// reader (so counters carry _total) at level detailed, after real OTLP
// traffic through two pipelines, each with its own receiver, batch
// processor and exporter (no compression, so the gateway sees the bytes
// the bytes histogram counts):
//  - batch/size (send_batch_size 30, timeout 30s): 3 requests of 10 spans
//    are merged into one request of 30 (size reached), then one of 40
//    spans, larger than send_batch_size, is sent as it is (size again);
//  - batch/timeout (send_batch_size 1000, timeout 200ms): one request of
//    10 spans waits out the timeout and is sent alone (timeout trigger).
// Asserted: the trigger counters, the histogram's count, sum and buckets,
// the bytes histogram against what the gateways received, cardinality 1.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp } = require('./lib/config');
const { Gateway } = require('./lib/gateway');
const peers = require('./lib/peers');

const P = 'otelcol_processor_batch_';

test('batch processor metrics: size and timeout triggers, send size histograms, upstream names', async () => {
  await harness('batch_metrics', async (h) => {
    const gwSize = new Gateway();
    const gwTimeout = new Gateway();
    await gwSize.start();
    await gwTimeout.start();
    h.onCleanup(() => gwSize.stop());
    h.onCleanup(() => gwTimeout.stop());
    const portSize = await freePort();
    const portTimeout = await freePort();
    const metricsPort = await freePort();
    const config = collectorConfig({
      receivers: { 'otlp/size': otlpReceiver({ grpc: portSize }), 'otlp/timeout': otlpReceiver({ grpc: portTimeout }) },
      processors: {
        'batch/size': { send_batch_size: 30, timeout: '30s' },
        'batch/timeout': { send_batch_size: 1000, timeout: '200ms' },
      },
      exporters: { 'otlphttp/size': otlphttp(gwSize.url), 'otlphttp/timeout': otlphttp(gwTimeout.url) },
      telemetry: {
        metrics: {
          level: 'detailed',
          readers: [{ pull: { exporter: { prometheus: { host: '127.0.0.1', port: metricsPort } } } }],
        },
      },
      pipelines: {
        'traces/size': { receivers: ['otlp/size'], processors: ['batch/size'], exporters: ['otlphttp/size'] },
        'traces/timeout': { receivers: ['otlp/timeout'], processors: ['batch/timeout'], exporters: ['otlphttp/timeout'] },
      },
    });
    const sf = h.track(new Spanfence({ dir: h.dir, config, grpcPort: portSize, metricsPort }));
    await sf.start();

    // Before any traffic: every series is there, at zero.
    let m = await sf.metrics();
    for (const p of ['batch/size', 'batch/timeout']) {
      assert.equal(m.must(`${P}batch_send_size_count`, { processor: p }), 0);
      assert.equal(m.must(`${P}batch_size_trigger_send_total`, { processor: p }), 0);
      assert.equal(m.must(`${P}timeout_trigger_send_total`, { processor: p }), 0);
      assert.equal(m.must(`${P}metadata_cardinality`, { processor: p }), 1);
    }

    let r = await peers.sendSdkSpans({ port: portSize, n: 30, batchSize: 10, prefix: 'small' });
    assert.ok(r.results.length >= 3 && r.results.every((x) => x.code === 0), 'three requests, answered OK');
    await gwSize.waitFor(() => gwSize.spans.length === 30, '30 spans at the gateway');
    r = await peers.sendSdkSpans({ port: portSize, n: 40, batchSize: 40, prefix: 'large' });
    assert.ok(r.results.every((x) => x.code === 0));
    r = await peers.sendSdkSpans({ port: portTimeout, n: 10, batchSize: 10, prefix: 'lone' });
    assert.ok(r.results.every((x) => x.code === 0));
    await gwSize.waitFor(() => gwSize.spans.length === 70, '70 spans at the size gateway');
    await gwTimeout.waitFor(() => gwTimeout.spans.length === 10, '10 spans at the timeout gateway');

    const sizes = gwSize.requests.map((q) => q.spans);
    assert.deepEqual(sizes, [30, 40], 'the small requests were merged into one, the large sent whole');
    assert.deepEqual(gwTimeout.requests.map((q) => q.spans), [10]);

    m = await sf.waitMetrics((x) => x.get(`${P}batch_send_size_count`, { processor: 'batch/size' }) === 2 &&
      x.get(`${P}batch_send_size_count`, { processor: 'batch/timeout' }) === 1, 'three requests counted');
    const s = { processor: 'batch/size' };
    const t = { processor: 'batch/timeout' };
    assert.equal(m.must(`${P}batch_size_trigger_send_total`, s), 2);
    assert.equal(m.must(`${P}timeout_trigger_send_total`, s), 0);
    assert.equal(m.must(`${P}batch_send_size_sum`, s), 70);
    assert.equal(m.must(`${P}batch_send_size_bucket`, { ...s, le: '25' }), 0);
    assert.equal(m.must(`${P}batch_send_size_bucket`, { ...s, le: '50' }), 2);
    assert.equal(m.must(`${P}batch_send_size_bucket`, { ...s, le: '+Inf' }), 2);
    assert.equal(m.must(`${P}timeout_trigger_send_total`, t), 1);
    assert.equal(m.must(`${P}batch_size_trigger_send_total`, t), 0);
    assert.equal(m.must(`${P}batch_send_size_sum`, t), 10);
    assert.equal(m.must(`${P}batch_send_size_bucket`, { ...t, le: '10' }), 1);
    // bytes: what each request carried, uncompressed, as the gateway got it
    const bytes = gwSize.requests.reduce((a, q) => a + q.bytes, 0);
    assert.equal(m.must(`${P}batch_send_size_bytes_count`, s), 2);
    assert.equal(m.must(`${P}batch_send_size_bytes_sum`, s), bytes);
    assert.equal(m.must(`${P}batch_send_size_bytes_sum`, t), gwTimeout.requests[0].bytes);
    assert.match(m.text, /# TYPE otelcol_processor_batch_batch_send_size histogram/);
    assert.match(m.text, /# TYPE otelcol_processor_batch_metadata_cardinality gauge/);
    assert.match(m.text, /otelcol_processor_batch_batch_send_size_bytes_bucket\{processor="batch\/size",le="1e\+06"\} 2/);
    await sf.stop();
    await sleep(0);
  });
});
