// tests/e2e/signals_flood.test.js: a flood of one signal with its gateway down
// does not hold up or drop the others (issue 25). One otlp receiver feeds
// three pipelines, each to its own exporter (bounded, bytes-sized queue) and
// its own stand-in gateway. h2load floods OTLP/gRPC exports of one signal
// round after round (traces: the project's ~555 KB SGLang-like batch;
// metrics: a ~520 KB SGLang scrape of 2,048 points, bench/signals_payload.py)
// while that signal's gateway is down; once its queue is full (refusals
// counted), the official JS SDK sends the other two signals over gRPC, HTTP
// protobuf and HTTP JSON. While the flood is still running and the gateway
// still down:
//  - every SDK export of the other signals is accepted and every item
//    reaches its gateway (the flood only stops after they all arrived: no
//    clock, the ordering is the proof);
//  - each signal's accounting adds up: the flooded one received = accepted +
//    refused, accepted = sent + failed + queued; the others accepted = sent,
//    nothing refused, failed or lost;
//  - memory stays within the memory limiter's limit (RSS with slack).
// Then the flooded signal's gateway comes back and its backlog is delivered.
// Test 1 floods traces (the issue's "What must show"), test 2 metrics (the
// reverse: a metrics burst never drops traces or logs).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { SignalGateway } = require('./lib/signal_gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const flood = require('./lib/flood');
const senders = require('./lib/senders');
const S = require('./lib/signals');

const SOURCE = process.env.SF_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const LIMIT_MIB = 160;
const RSS_SLACK_MIB = 32;
const QUEUE_BYTES = 16 << 20;         // far under the limit: each queue is its signal's bound
const PER_PROTOCOL = 30;              // spans / log records per protocol
const SCRAPES = 2;
const ROUND = 200;                    // flood exports per h2load round
const MAX_ROUNDS = 40;                // ends a run that is stuck, not a speed bound
const SIGNALS = ['traces', 'logs', 'metrics'];
const ITEMS = { traces: 'spans', logs: 'log_records', metrics: 'metric_points' };
const METHOD = {
  traces: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
  metrics: '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export',
};
const RCV = { receiver: 'otlp' };
const exp = (signal) => ({ exporter: `otlphttp/${signal}` });

function config() {
  const exporters = Object.fromEntries(SIGNALS.map((s) => [`otlphttp/${s}`,
    otlphttp(`http://127.0.0.1:${envPort(`GW_${s.toUpperCase()}`)}`, {
      timeout: '5s',
      sending_queue: { sizer: 'bytes', queue_size: QUEUE_BYTES, num_consumers: 4 },
      retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: 0 },
    })]));
  const pipelines = Object.fromEntries(SIGNALS.map((s) => [s,
    { receivers: ['otlp'], processors: ['memory_limiter', 'batch'], exporters: [`otlphttp/${s}`] }]));
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    processors: { memory_limiter: { check_interval: '100ms', limit_mib: LIMIT_MIB }, batch: null },
    exporters,
    metricsPort: envPort('METRICS'),
    pipelines,
  });
}

// The flood's request, gRPC-framed; returns {file, items per request}.
function payload(dir, signal) {
  if (signal === 'traces') return { file: flood.writePayload(dir, { grpcFrame: true }), items: flood.SPANS_PER_REQUEST };
  const file = path.join(dir, 'metrics.grpc');
  execFileSync('python3', [path.join(SOURCE, 'bench', 'signals_payload.py'), 'metrics', file, '--grpc-frame', '--items', '2048']);
  return { file, items: 2048 };
}

// The SDK's exports of `signal` over every protocol; returns items sent.
async function sendOther(signal, ports) {
  let n = 0;
  for (const protocol of S.PROTOCOLS) {
    const opts = { grpcPort: ports.grpc, httpPort: ports.http };
    let results;
    if (signal === 'traces') {
      ({ results } = await senders.sendSpans(senders.makeExporter(protocol, { ...opts, compression: 'none' }),
        { n: PER_PROTOCOL, batchSize: 10, prefix: protocol }));
      n += PER_PROTOCOL;
    } else if (signal === 'logs') {
      ({ results } = await S.sendLogs(S.makeExporter('logs', protocol, opts), { n: PER_PROTOCOL, batchSize: 10, prefix: protocol }));
      n += PER_PROTOCOL;
    } else {
      ({ results } = await S.sendMetrics(S.makeExporter('metrics', protocol, opts), { scrapes: SCRAPES, prefix: protocol }));
      n += results.reduce((a, r) => a + (r.items !== undefined ? r.items : r.spans), 0);
    }
    assert.deepEqual(results.filter((r) => r.code !== 0), [], `${protocol}: no ${signal} export refused during the flood`);
  }
  return n;
}

async function floodOne(t, flooded) {
  await harness(`signals_flood_${flooded}`, async (h) => {
    const gw = {};
    for (const s of SIGNALS) {
      gw[s] = new SignalGateway(`${s} gateway`);
      await gw[s].start();
      h.onCleanup(() => gw[s].stop());
    }
    // spanfence's ports are picked while every gateway still holds its own
    const ports = { grpc: await freePort(), http: await freePort(), metrics: await freePort() };
    await gw[flooded].stop();     // down from the start; its port is kept for its return
    const others = SIGNALS.filter((s) => s !== flooded);
    const env = { SF_GRPC_PORT: String(ports.grpc), SF_HTTP_PORT: String(ports.http), SF_METRICS_PORT: String(ports.metrics) };
    for (const s of SIGNALS) env[`SF_GW_${s.toUpperCase()}_PORT`] = String(gw[s].port);
    const sf = h.track(new Spanfence({ dir: h.dir, config: config(), env, grpcPort: ports.grpc, metricsPort: ports.metrics }));
    await sf.start();

    // The flood: h2load rounds until told to stop (after the others arrived).
    const { file, items } = payload(h.dir, flooded);
    const s = flood.sampler(sf);
    let stopFlood = false;
    let rounds = 0;
    let floodDone = 0;
    const flooder = (async () => {
      while (!stopFlood && rounds < MAX_ROUNDS) {
        const r = await flood.h2load(['-n', String(ROUND), '-c', '4', '-m', '8', '-d', file,
          '-H', 'content-type: application/grpc', '-H', 'te: trailers',
          `http://127.0.0.1:${ports.grpc}${METHOD[flooded]}`], 120000);
        assert.equal(r.done, ROUND, `every ${flooded} export answered:\n${r.out.slice(-1500)}`);
        assert.equal(r.errored + r.timeout, 0, 'no connection error or timeout');
        floodDone += r.done;
        rounds++;
      }
    })();
    const floodRunning = () => !stopFlood && rounds < MAX_ROUNDS;
    const it = ITEMS[flooded];

    // Its queue is full: the flooded signal is being refused.
    await sf.waitMetrics((x) => (x.get(`otelcol_receiver_refused_${it}`, RCV) || 0) > 0,
      `the ${flooded} flood fills its queue (items refused)`, 120000);
    assert.ok(floodRunning(), 'the flood is still on when the other signals start');

    const sent = {};
    for (const o of others) sent[o] = await sendOther(o, ports);
    const have = (o) => gw[o].items[o].length;
    await Promise.all(others.map((o) => gw[o].waitFor(() => have(o) >= sent[o],
      `${sent[o]} ${ITEMS[o]} at the ${o} gateway`, 180000)));
    const stillFlooding = floodRunning();
    stopFlood = true;
    await flooder;
    const peaks = await s.stop();
    t.diagnostic(`${flooded} flood: ${rounds} rounds, ${floodDone} exports; peak RSS ${(peaks.peakRssKiB / 1024).toFixed(1)} MiB, ` +
      `peak counted ${(peaks.peakCountedBytes / 1048576).toFixed(1)} MiB (limit ${LIMIT_MIB} MiB)`);
    assert.ok(stillFlooding, `the others arrived while the ${flooded} flood was on (it ran ${rounds} of at most ${MAX_ROUNDS} rounds)`);
    for (const o of others) assert.equal(have(o), sent[o], `no ${ITEMS[o]} twice`);
    assert.equal(gw[flooded].requests.length, 0, `the ${flooded} gateway was down throughout`);

    // Accounting per signal, the flooded signal's gateway still down.
    const floodItems = floodDone * items;
    const m = await sf.waitMetrics((x) =>
      others.every((o) => x.get(`otelcol_exporter_sent_${ITEMS[o]}`, exp(o)) === sent[o]) &&
      x.get(`otelcol_receiver_accepted_${it}`, RCV) + x.get(`otelcol_receiver_refused_${it}`, RCV) === floodItems,
    'each signal counted');
    const acc = m.must(`otelcol_receiver_accepted_${it}`, RCV);
    const ref = m.must(`otelcol_receiver_refused_${it}`, RCV);
    assert.ok(ref > 0 && acc > 0, `${flooded}: accepted ${acc}, refused ${ref}`);
    assert.equal(m.must(`otelcol_exporter_sent_${it}`, exp(flooded)), 0);
    assert.equal(acc, m.must(`otelcol_exporter_send_failed_${it}`, exp(flooded)) +
      m.must(`spanfence_exporter_queued_${it}`, exp(flooded)), `${flooded}: accepted = sent + failed + queued`);
    for (const o of others) {
      const oi = ITEMS[o];
      assert.equal(m.must(`otelcol_receiver_accepted_${oi}`, RCV), sent[o], `${o} accepted`);
      assert.equal(m.must(`otelcol_receiver_refused_${oi}`, RCV), 0, `no ${oi} refused`);
      assert.equal(m.must(`otelcol_exporter_send_failed_${oi}`, exp(o)), 0, `${oi} send_failed`);
      assert.equal(m.must(`otelcol_exporter_enqueue_failed_${oi}`, exp(o)), 0, `${oi} enqueue_failed`);
    }
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: RSS bound not checked (it measures the sanitizer)');
    } else {
      assert.ok(peaks.peakRssKiB <= (LIMIT_MIB + RSS_SLACK_MIB) * 1024,
        `peak RSS ${peaks.peakRssKiB} KiB over ${LIMIT_MIB} + ${RSS_SLACK_MIB} MiB`);
    }
    assert.ok(peaks.peakCountedBytes <= LIMIT_MIB * 1048576, `peak counted ${peaks.peakCountedBytes} bytes over the limit`);

    // The gateway returns: the backlog is delivered, nothing lost.
    await gw[flooded].start();
    const m2 = await sf.waitMetrics((x) => x.get(`spanfence_exporter_queued_${it}`, exp(flooded)) === 0 &&
      x.get(`otelcol_exporter_sent_${it}`, exp(flooded)) === acc, `${flooded} backlog delivered`, 120000);
    assert.equal(m2.must(`otelcol_exporter_send_failed_${it}`, exp(flooded)), 0);
    await gw[flooded].waitFor(() => gw[flooded].items[flooded].length >= acc, `${acc} ${it} at the ${flooded} gateway`);
    assert.equal(gw[flooded].items[flooded].length, acc, `the ${flooded} gateway got every accepted item once`);
    await sf.stop(30000);
  });
}

test('trace flood, traces gateway down: logs and metrics still delivered, each signal counted, memory bounded', async (t) => {
  await floodOne(t, 'traces');
});

test('metrics flood, metrics gateway down: traces and logs still delivered, each signal counted, memory bounded', async (t) => {
  await floodOne(t, 'metrics');
});
