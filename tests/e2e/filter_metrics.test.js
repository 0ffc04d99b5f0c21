// tests/e2e/filter_metrics.test.js: the `filter` processor in a metrics
// pipeline after a memory_limiter, on the real binary: metrics named by its
// conditions never reach the gateway (not their names, descriptions or
// points), the others do unchanged, a request left with no point is
// answered OK and not exported (exporters send no empty request), every
// point received is sent or counted as dropped with reason "filtered"
// (status: filtered, not lost), and the memory_limiter before the filter
// counts what was received. Requests are built byte by byte.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp } = require('./lib/config');
const proto = require('./lib/proto');
const { SignalGateway } = require('./lib/signal_gateway');

const { lenField: len, fixed64Field: fixed64 } = proto;
const str = (num, s) => len(num, Buffer.from(s));

// A gauge `name` with `points` points and a description.
function metric(name, points, description) {
  const ps = [];
  for (let i = 0; i < points; i++) {
    ps.push(len(1, Buffer.concat([fixed64(3, 1700000000000000000n), fixed64(6, i + 1)])));
  }
  return Buffer.concat([str(1, name), str(2, description), len(5, Buffer.concat(ps))]);
}

// ExportMetricsServiceRequest with the given metrics in one scope.
const request = (...metrics) => len(1, len(2, Buffer.concat(metrics.map((m) => len(2, m)))));

function config() {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ http: '${env:SF_HTTP_PORT}' }) },
    processors: {
      memory_limiter: { check_interval: '1s', limit_mib: 256 },
      'filter/names': {
        error_mode: 'ignore',
        metrics: {
          metric: ['IsMatch(name, "^debug\\\\.")', 'name == "sglang:prompt_dump"', 'name == "go_goroutines"'],
        },
      },
    },
    exporters: {
      'otlphttp/metrics': otlphttp('http://127.0.0.1:${env:SF_HTTP_SINK}'),
      'otlphttp/traces': otlphttp('http://127.0.0.1:${env:SF_HTTP_SINK}'),
    },
    metricsPort: '${env:SF_METRICS_PORT}',
    pipelines: {
      traces: { receivers: ['otlp'], exporters: ['otlphttp/traces'] },
      metrics: { receivers: ['otlp'], processors: ['memory_limiter', 'filter/names'], exporters: ['otlphttp/metrics'] },
    },
  });
}

const has = (buf, text) => buf.includes(Buffer.from(text));

test('the filter drops metrics by name, counted, and sends the rest unchanged', async () => {
  await harness('filter_metrics', async (h) => {
    const gw = new SignalGateway('metrics gateway');
    gw.keepBodies = true;
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = {
      SF_HTTP_PORT: await freePort(), SF_METRICS_PORT: await freePort(), SF_HTTP_SINK: gw.port,
    };
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(), env, grpcPort: ports.SF_HTTP_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    await sf.start();
    const post = (body) => fetch(`http://127.0.0.1:${ports.SF_HTTP_PORT}/v1/metrics`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-protobuf' }, body,
    });

    // (the HTTP port stands for the gRPC one start() waits on)
    // 1: kept (2 points) beside three dropped (1 + 3 + 2 points)
    const kept = metric('sglang:num_running_reqs', 2, 'running requests');
    let r = await post(request(metric('debug.prompt', 1, 'MARK-1'), kept,
      metric('sglang:prompt_dump', 3, 'MARK-2'), metric('go_goroutines', 2, 'MARK-3')));
    assert.equal(r.status, 200, await r.text());
    // 2: every metric dropped: answered OK, nothing exported
    r = await post(request(metric('debug.x', 4, 'MARK-4')));
    assert.equal(r.status, 200, await r.text());

    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_metric_points',
      { exporter: 'otlphttp/metrics' }) === 2 &&
      x.get('otelcol_processor_filter_datapoints_filtered', { processor: 'filter/names' }) === 10,
    'the kept points sent, the others filtered');

    const exports = gw.of('metrics');
    assert.equal(exports.length, 1, 'one export: the request with no point left is not sent');
    assert.ok(exports[0].body.includes(kept), 'the kept metric leaves as it came');
    assert.deepEqual(gw.points.map((p) => p.name), ['sglang:num_running_reqs', 'sglang:num_running_reqs']);
    assert.deepEqual(gw.points.map((p) => p.description), ['running requests', 'running requests']);
    for (const text of ['MARK', 'debug.', 'prompt_dump', 'go_goroutines']) {
      assert.ok(!has(exports[0].body, text), `${text} reached the gateway`);
    }
    assert.deepEqual(gw.requests.filter((r) => r.signal !== 'metrics').map((r) => r.path), []);

    // every point received: sent, or dropped with reason "filtered"
    assert.equal(m.must('otelcol_receiver_accepted_metric_points', { receiver: 'otlp', transport: 'http' }), 12);
    assert.equal(m.must('otelcol_processor_dropped_metric_points',
      { processor: 'filter/names', reason: 'filtered' }), 10);
    assert.equal(m.must('otelcol_processor_incoming_items', { processor: 'filter/names', otel_signal: 'metrics' }), 12);
    assert.equal(m.must('otelcol_processor_outgoing_items', { processor: 'filter/names', otel_signal: 'metrics' }), 2);
    // the processor before the filter counts what was received, not what the filter left
    assert.equal(m.must('otelcol_processor_incoming_items', { processor: 'memory_limiter', otel_signal: 'metrics' }), 12);
    assert.equal(m.must('otelcol_processor_outgoing_items', { processor: 'memory_limiter', otel_signal: 'metrics' }), 12);
    const status = await (await fetch(`http://127.0.0.1:${ports.SF_METRICS_PORT}/status`)).json();
    assert.equal(status.metric_points.accepted, 12);
    assert.equal(status.metric_points.exported, 2);
    assert.equal(status.metric_points.filtered, 10);
    assert.equal(status.metric_points.lost, 0);
    await sf.stop();
  });
});
