// tests/e2e/signals_flood.test.js: a trace flood with the traces gateway down
// does not hold up or drop logs and metrics (issue 25). One otlp receiver
// feeds three pipelines; traces go to a gateway that is down, behind a
// bounded bytes-sized queue, logs and metrics to a telemetry gateway that is
// up. h2load floods OTLP/gRPC trace exports (the project's ~555 KB SGLang-like
// batch) round after round; once the trace queue is full (refusals counted),
// the official JS SDK sends app logs and engine metrics over gRPC, HTTP
// protobuf and HTTP JSON. While the flood is still running and the traces
// gateway still down:
//  - every SDK log and metric export is accepted (never refused, never
//    retried into loss) and every record and point reaches the telemetry
//    gateway (the flood only stops after they all arrived: no clock, the
//    ordering is the proof);
//  - each signal's accounting adds up: traces received = accepted + refused,
//    accepted = sent + failed + queued; logs and metrics accepted = sent, with
//    nothing refused, failed or lost;
//  - memory stays within the memory limiter's limit (RSS with slack).
// Then the traces gateway comes back and the trace backlog is delivered.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { SignalGateway } = require('./lib/signal_gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const flood = require('./lib/flood');
const S = require('./lib/signals');

const LIMIT_MIB = 160;
const RSS_SLACK_MIB = 32;
const TRACE_QUEUE_BYTES = 16 << 20;   // far under the limit: the queue is the traces' bound
const LOGS_PER_PROTOCOL = 30;
const SCRAPES = 2;
const ROUND = 200;                    // trace exports per h2load round
const MAX_ROUNDS = 40;                // ends a run that is stuck, not a speed bound

function config() {
  return `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:\${env:SF_GRPC_PORT}
      http:
        endpoint: 127.0.0.1:\${env:SF_HTTP_PORT}
processors:
  memory_limiter:
    check_interval: 100ms
    limit_mib: ${LIMIT_MIB}
  batch:
exporters:
  otlphttp/traces:
    endpoint: http://127.0.0.1:\${env:SF_TRACES_PORT}
    compression: none
    timeout: 5s
    sending_queue: {sizer: bytes, queue_size: ${TRACE_QUEUE_BYTES}, num_consumers: 4}
    retry_on_failure: {initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 0}
  otlphttp/telemetry:
    endpoint: http://127.0.0.1:\${env:SF_TELEMETRY_PORT}
    compression: gzip
    sending_queue: {sizer: bytes, queue_size: 8388608, num_consumers: 2}
    retry_on_failure: {initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 0}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:\${env:SF_METRICS_PORT}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter]
      exporters: [otlphttp/traces]
    logs:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [otlphttp/telemetry]
    metrics:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [otlphttp/telemetry]
`;
}

const TEXP = { exporter: 'otlphttp/traces' };
const LEXP = { exporter: 'otlphttp/telemetry' };
const RCV = { receiver: 'otlp' };

// Sum over every reason label (absent metric: 0 only where the caller allows).
function refusedSpans(m) {
  return m.must('otelcol_receiver_refused_spans', RCV);
}

test('trace flood, traces gateway down: logs and metrics still delivered, each signal counted, memory bounded', async (t) => {
  await harness('signals_flood', async (h) => {
    const traces = new SignalGateway('traces gateway');
    await traces.start();
    await traces.stop();          // down from the start; its port is kept for its return
    const telemetry = new SignalGateway('telemetry gateway');
    await telemetry.start();
    h.onCleanup(() => traces.stop());
    h.onCleanup(() => telemetry.stop());
    const ports = { grpc: await freePort(), http: await freePort(), metrics: await freePort() };
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config(),
      env: {
        SF_GRPC_PORT: String(ports.grpc), SF_HTTP_PORT: String(ports.http), SF_METRICS_PORT: String(ports.metrics),
        SF_TRACES_PORT: String(traces.port), SF_TELEMETRY_PORT: String(telemetry.port),
      },
      grpcPort: ports.grpc,
      metricsPort: ports.metrics,
    }));
    await sf.start();

    // The flood: h2load rounds until told to stop (after logs and metrics arrived).
    const file = flood.writePayload(h.dir, { grpcFrame: true });
    const s = flood.sampler(sf);
    let stopFlood = false;
    let rounds = 0;
    let floodDone = 0;
    const flooder = (async () => {
      while (!stopFlood && rounds < MAX_ROUNDS) {
        const r = await flood.h2load(flood.grpcFlood(ports.grpc, file, { n: ROUND, c: 4, m: 8 }), 120000);
        assert.equal(r.done, ROUND, `every trace export answered:\n${r.out.slice(-1500)}`);
        assert.equal(r.errored + r.timeout, 0, 'no connection error or timeout');
        floodDone += r.done;
        rounds++;
      }
    })();
    const floodRunning = () => !stopFlood && rounds < MAX_ROUNDS;

    // The trace queue is full: traces are being refused.
    await sf.waitMetrics((x) => (x.get('otelcol_receiver_refused_spans', RCV) || 0) > 0,
      'the trace flood fills the traces queue (spans refused)', 120000);
    assert.ok(floodRunning(), 'the flood is still on when logs and metrics start');

    // Logs and metrics, each protocol, while the flood goes on.
    let logs = 0;
    let points = 0;
    for (const protocol of S.PROTOCOLS) {
      const lex = S.makeExporter('logs', protocol, { grpcPort: ports.grpc, httpPort: ports.http });
      const sl = await S.sendLogs(lex, { n: LOGS_PER_PROTOCOL, batchSize: 10, prefix: protocol });
      assert.deepEqual(sl.results.filter((r) => r.code !== 0), [], `${protocol}: no log export refused during the trace flood`);
      logs += LOGS_PER_PROTOCOL;
      const mex = S.makeExporter('metrics', protocol, { grpcPort: ports.grpc, httpPort: ports.http });
      const sm = await S.sendMetrics(mex, { scrapes: SCRAPES, prefix: protocol });
      assert.deepEqual(sm.results.filter((r) => r.code !== 0), [], `${protocol}: no metrics export refused during the trace flood`);
      points += sm.results.reduce((a, r) => a + r.items, 0);
    }
    await telemetry.waitFor(() => telemetry.logs.length >= logs && telemetry.points.length >= points,
      `${logs} log records and ${points} metric points at the telemetry gateway`, 180000);
    const stillFlooding = floodRunning();
    stopFlood = true;
    await flooder;
    const peaks = await s.stop();
    t.diagnostic(`flood: ${rounds} rounds, ${floodDone} trace exports; peak RSS ${(peaks.peakRssKiB / 1024).toFixed(1)} MiB, ` +
      `peak counted ${(peaks.peakCountedBytes / 1048576).toFixed(1)} MiB (limit ${LIMIT_MIB} MiB)`);
    assert.ok(stillFlooding, `logs and metrics arrived while the trace flood was on (it ran ${rounds} of at most ${MAX_ROUNDS} rounds)`);
    assert.equal(telemetry.logs.length, logs, 'no log record twice');
    assert.equal(telemetry.points.length, points, 'no metric point twice');
    assert.equal(traces.requests.length, 0, 'the traces gateway was down throughout');

    // Accounting per signal, traces gateway still down.
    const sentSpans = floodDone * flood.SPANS_PER_REQUEST;
    const m = await sf.waitMetrics((x) =>
      x.get('otelcol_exporter_sent_log_records', LEXP) === logs &&
      x.get('otelcol_exporter_sent_metric_points', LEXP) === points &&
      x.get('otelcol_receiver_accepted_spans', RCV) + refusedSpans(x) === sentSpans,
    'each signal counted');
    const acc = m.must('otelcol_receiver_accepted_spans', RCV);
    const ref = refusedSpans(m);
    assert.ok(ref > 0 && acc > 0, `traces: accepted ${acc}, refused ${ref}`);
    assert.equal(m.must('otelcol_exporter_sent_spans', TEXP), 0);
    assert.equal(acc, m.must('otelcol_exporter_sent_spans', TEXP) + m.must('otelcol_exporter_send_failed_spans', TEXP) +
      m.must('spanfence_exporter_queued_spans', TEXP), 'traces: accepted = sent + failed + queued');
    assert.equal(m.must('otelcol_receiver_accepted_log_records', RCV), logs, 'logs accepted');
    assert.equal(m.must('otelcol_receiver_refused_log_records', RCV), 0, 'no log record refused');
    assert.equal(m.must('otelcol_receiver_accepted_metric_points', RCV), points, 'points accepted');
    assert.equal(m.must('otelcol_receiver_refused_metric_points', RCV), 0, 'no metric point refused');
    for (const items of ['log_records', 'metric_points']) {
      assert.equal(m.must(`otelcol_exporter_send_failed_${items}`, LEXP), 0, `${items} send_failed`);
      assert.equal(m.must(`otelcol_exporter_enqueue_failed_${items}`, LEXP), 0, `${items} enqueue_failed`);
      assert.equal(m.get(`otelcol_exporter_sent_${items}`, TEXP) || 0, 0, `no ${items} on the traces exporter`);
    }
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: RSS bound not checked (it measures the sanitizer)');
    } else {
      assert.ok(peaks.peakRssKiB <= (LIMIT_MIB + RSS_SLACK_MIB) * 1024,
        `peak RSS ${peaks.peakRssKiB} KiB over ${LIMIT_MIB} + ${RSS_SLACK_MIB} MiB`);
    }
    assert.ok(peaks.peakCountedBytes <= LIMIT_MIB * 1048576, `peak counted ${peaks.peakCountedBytes} bytes over the limit`);

    // The traces gateway returns: the backlog is delivered, nothing lost.
    await traces.start();
    const m2 = await sf.waitMetrics((x) => x.get('spanfence_exporter_queued_spans', TEXP) === 0 &&
      x.get('otelcol_exporter_sent_spans', TEXP) === acc, 'trace backlog delivered', 120000);
    assert.equal(m2.must('otelcol_exporter_send_failed_spans', TEXP), 0);
    await traces.waitFor(() => traces.spans.length >= acc, `${acc} spans at the traces gateway`);
    assert.equal(traces.spans.length, acc, 'the traces gateway got every accepted span once');
    await sf.stop(30000);
  });
});
