// tests/e2e/fair_queue.test.js: the sending queue is shared fairly between
// clients (issue 33). The exporter's drain is known and bounded: one
// consumer, merged requests of at most MERGE_MAX spans, a destination
// (sf_sink) that answers each one DELAY_MS late, so it drains at most
// MERGE_MAX / DELAY_MS spans/s. An engine-rate client (20 k spans/s in
// 100-span calls, its own connection) runs; beside it a flooder (sf_send,
// one connection, 4 calls at once) sends valid 2,000-span calls at 8x that bound (and must
// offer at least 5x what was drained). The engine sees >= 99 % of its calls
// OK: once the queue is over half full the flooder may hold only its share
// (capacity / 2 clients), so the engine's calls still find room. The
// flooder was refused for its share (spanfence_receiver_refused_share_requests),
// every refused call is counted (refused_requests{queue_full} = the calls the
// clients saw refused), and the accounting is exact at the end:
// accepted = sent + send_failed + queued.
// The property needs the drain above twice the engine's rate (each of two
// clients gets half of it), and a flood of 5x the drain: when sf_send cannot
// make the flood, or the consumer cannot keep up with a 50 ms gateway though
// the collector had the CPU (its threads waited for one less than they
// ran), the test fails on that premise, saying so. When they waited longer
// (a machine busy with other work: stress-ng, a sanitizer), the rates are
// the machine's: printed, not asserted; the share's refusals and the
// accounting are checked all the same.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');

const { Spanfence, freePort, harness } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const deps = require('./lib/deps');
const flood = require('./lib/flood');
const peers = require('./lib/peers');

const QUEUE_SPANS = 40000;
const MERGE_MAX = 5000;
const DELAY_MS = 50;
const DRAIN_MAX = (MERGE_MAX * 1000) / DELAY_MS;            // spans/s, 100 k
const FLOOD_SPANS = 2000;
const FLOOD_RATE = (8 * DRAIN_MAX) / FLOOD_SPANS;           // calls/s, 400: aims past 5x
const FLOOD_S = 8;
// The flooder's one connection carries 4 calls at once of lean spans (no
// text, no events: 0.6 MB a call). With the full sample spans (1.9 MB a
// call, one at a time) the collector read one connection at 298-362 k
// spans/s here, and CI saw the premise fail at 298 k against 5 x 62.5 k;
// lean, it offers its whole 400 calls/s (750-760 k spans/s, 10x the drain).
const FLOOD_INFLIGHT = 4;
const FLOOD_AFTER = 40;                                     // engine calls before the flood
const ENGINE_SPANS = 100;
const ENGINE_RATE = 200;                                    // calls/s: 20 k spans/s
const ENGINE_CALLS = 1000;                                  // 5 s
const EXP = { exporter: 'otlphttp/sink' };
const RCV = { receiver: 'otlp', transport: 'grpc' };

function config() {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC') }) },
    exporters: {
      'otlphttp/sink': otlphttp(`http://127.0.0.1:${envPort('SINK')}`, {
        timeout: '5s',
        sending_queue: {
          sizer: 'items', queue_size: QUEUE_SPANS, num_consumers: 1,
          batch: { sizer: 'items', min_size: MERGE_MAX, max_size: MERGE_MAX, flush_timeout: `${DELAY_MS}ms` },
        },
        retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: 0 },
      }),
    },
    metricsPort: envPort('METRICS'),
    pipelines: { traces: { receivers: ['otlp'], exporters: ['otlphttp/sink'] } },
  });
}

// sf_send's summary: {requests, ok, statuses: {NAME: n}}.
function parseSend(out) {
  const m = /requests: (\d+), spans sent: (\d+), spans accepted: (\d+), seconds: ([\d.]+)/.exec(out);
  assert.ok(m, `sf_send output: ${out}`);
  const statuses = {};
  for (const l of out.split('\n')) {
    const s = /^ {2}([A-Z_]+): (\d+)(?: \(.*\))?$/.exec(l);
    if (s) statuses[s[1]] = Number(s[2]);
  }
  return { requests: +m[1], spansSent: +m[2], spansOk: +m[3], seconds: +m[4], statuses };
}

function runSend(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(deps.sendBin(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.once('error', reject);
    p.once('exit', (code) => {
      // 1: some call was not OK, which is what a flooder expects
      if (code !== 0 && code !== 1) reject(new Error(`sf_send exited ${code}: ${err.slice(-2000)}`));
      else resolve(parseSend(out));
    });
  });
}

test('a flooder at 5x the drain is refused for its share; an engine-rate client keeps >= 99 % OK', async (t) => {
  await harness('fair_queue', async (h) => {
    const [grpcPort, metricsPort, sinkPort] = [await freePort(), await freePort(), await freePort()];
    const sink = new flood.Sink(sinkPort, ['-d', String(DELAY_MS)]);
    h.onCleanup(() => sink.stop());
    await sink.start();
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(), grpcPort, metricsPort,
      env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort),
        SF_SINK_PORT: String(sinkPort) },
    }));
    await sf.start();

    const engine = new peers.grpc.Client(`127.0.0.1:${grpcPort}`, peers.grpc.credentials.createInsecure(),
      { 'grpc.use_local_subchannel_pool': 1 });
    h.onCleanup(() => engine.close());
    const req = peers.serializedSpans(ENGINE_SPANS, 'engine');
    const call = () => new Promise((resolve) => {
      engine.makeUnaryRequest(peers.EXPORT_METHOD, (x) => x, (x) => x, req.bytes, new peers.grpc.Metadata(),
        { deadline: Date.now() + 30000 }, (err) => resolve(err ? err.code : 0));
    });
    assert.equal(await call(), 0, 'the engine connection set up by a first call');

    // The engine: ENGINE_RATE calls/s on a fixed schedule, every result
    // kept; the flooder starts beside it once it runs, and outlasts it.
    // The queue's size is sampled meanwhile: the share applies only while
    // it is over half full, which the flood must keep it for the test to
    // mean anything.
    const start = Date.now();
    const results = [];
    const samples = [];
    let gauges = null;
    let flooder = null;
    let consumer = null;
    let whole = null;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        try {
          const q = (await sf.metrics()).must('otelcol_exporter_queue_size', EXP);
          if (flooder !== null) samples.push(q);
        } catch (_) { /* busy */ }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    for (let i = 0; i < ENGINE_CALLS; i++) {
      const due = start + (i * 1000) / ENGINE_RATE;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      results.push(call());
      if (i === FLOOD_AFTER) {
        consumer = flood.schedMeter(sf, 'sf-export');
        whole = flood.schedMeter(sf);
        flooder = runSend(['--endpoint', `127.0.0.1:${grpcPort}`, '--spans', String(FLOOD_SPANS),
          '--threads', '1', '--lean', '--inflight', String(FLOOD_INFLIGHT), '--rate', String(FLOOD_RATE),
          '--duration', String(FLOOD_S)]);
      }
      if (i === ENGINE_CALLS / 2) sf.metrics().then((m) => { gauges = m; }, () => {});
    }
    const codes = await Promise.all(results);
    const engineS = (Date.now() - start) / 1000;
    const cons = consumer.stop();
    const all = whole.stop();
    sampling = false;
    await sampler;
    const floodRunning = flooder !== null;
    const f = await flooder;
    const floodS = (Date.now() - start) / 1000;
    assert.ok(floodRunning);
    assert.ok(engineS < FLOOD_S, `the engine's calls (${engineS} s) ran inside the flood (${FLOOD_S} s)`);
    // at the pressure point: half full, but for what one merged request
    // takes out and one flood call puts back
    const pressed = samples.filter((q) => q >= QUEUE_SPANS / 2 - MERGE_MAX - FLOOD_SPANS).length;

    const ok = codes.filter((c) => c === 0).length;
    const engineRefused = codes.filter((c) => c !== 0);
    assert.ok(engineRefused.every((c) => c === peers.status.UNAVAILABLE),
      `engine calls failed otherwise than refused: ${JSON.stringify(engineRefused.slice(0, 5))}`);

    // Quiescent: everything accepted is sent (the sink answers every request).
    const m = await sf.waitMetrics((x) => x.get('spanfence_exporter_queued_spans', EXP) === 0,
      'the queue drained', 120000);
    const accepted = m.must('otelcol_receiver_accepted_spans', RCV);
    const sent = m.must('otelcol_exporter_sent_spans', EXP);
    let failed = 0;
    for (const reason of ['retries_exhausted', 'permanent_error', 'shutdown', 'internal', 'queue_full',
      'memory_limit', 'malformed', 'too_large', 'filter_failed']) {
      failed += m.get('otelcol_exporter_send_failed_spans', { ...EXP, reason }) ?? 0;
    }
    const queued = m.must('spanfence_exporter_queued_spans', EXP);
    const refusedCalls = m.must('spanfence_receiver_refused_requests', { ...RCV, reason: 'queue_full' });
    const refusedShare = m.must('spanfence_receiver_refused_share_requests', RCV);
    const refusedSpans = m.must('otelcol_receiver_refused_spans', { ...RCV, reason: 'queue_full' });
    const floodRefused = f.requests - (f.statuses.OK || 0);
    const floodOffered = (f.requests * FLOOD_SPANS) / f.seconds;
    const drained = sent / floodS;

    t.diagnostic(`engine ${ok}/${ENGINE_CALLS} OK in ${engineS.toFixed(2)} s; flooder ${f.requests} calls ` +
      `in ${f.seconds.toFixed(2)} s (${Math.round(floodOffered)} spans/s offered), ${floodRefused} refused ` +
      `(${JSON.stringify(f.statuses)}); drained ${Math.round(drained)} spans/s (at most ${DRAIN_MAX}); ` +
      `refused calls ${refusedCalls} (share ${refusedShare}); queue at half in ${pressed} of ` +
      `${samples.length} samples; ` +
      `gauges mid-run: clients ${gauges && gauges.get('spanfence_exporter_queue_clients', EXP)}, ` +
      `share ${gauges && gauges.get('spanfence_exporter_queue_share', EXP)}; ` +
      `consumer ran ${cons.run.toFixed(2)} s, waited for a CPU ${cons.wait.toFixed(2)} s of ` +
      `${cons.wall.toFixed(2)} s; all threads ran ${all.run.toFixed(2)} s, waited ${all.wait.toFixed(2)} s`);

    // The flood was a flood, kept the queue at half full (where the share
    // applies) for most of the engine's calls, and was refused for its
    // share.
    assert.ok(floodRefused > 0 && refusedShare > 0, 'the flooder was never refused for its share');
    // The rates (the flood's, the drain's, the engine's share of it) are the
    // machine's under a sanitizer, several times slower: there the share's
    // refusals and the accounting are checked, not the rates.
    // So are they on a machine whose other work keeps the collector off the
    // CPU (stress-ng beside it): its threads then wait for a CPU longer than
    // they run (measured idle: 0.5-0.8 s of waiting a second of running;
    // under `stress-ng --cpu 2 --vm 1`: 3-8 s), the drain falls to what the
    // scheduler gives a consumer at nice +5, and no split carries the engine.
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: the rate premises and the engine\'s 99 % not checked (they measure the sanitizer)');
    } else if (all.starved) {
      t.diagnostic(`the collector waited for a CPU ${all.wait.toFixed(2)} s and ran ${all.run.toFixed(2)} s: ` +
        'the machine bounds the rates; the rate premises and the engine\'s 99 % not checked');
    } else {
      assert.ok(pressed >= 0.8 * samples.length,
        `the queue was at half full in ${pressed} of ${samples.length} samples`);
      assert.ok(floodOffered >= 5 * drained,
        `the flooder offered ${Math.round(floodOffered)} spans/s, not 5x the drain (${Math.round(drained)})`);
      // The premise: the exporter drained at least twice the engine's rate
      // (2 clients, half each). Below that no fair split carries the engine
      // (it is then over its own half of the drain); said plainly, as the
      // cause, rather than as the engine's refusals.
      assert.ok(drained >= 2 * ENGINE_RATE * ENGINE_SPANS,
        `the exporter drained ${Math.round(drained)} spans/s, under twice the engine's ` +
        `${ENGINE_RATE * ENGINE_SPANS}: its consumer was starved of CPU, not held to ${DRAIN_MAX}`);
      // The engine-rate client: >= 99 % OK.
      assert.ok(ok >= 0.99 * ENGINE_CALLS, `engine-rate client: ${ok} of ${ENGINE_CALLS} OK`);
    }
    // Every refused call counted, in calls and spans; share refusals among them.
    assert.equal(refusedCalls, floodRefused + engineRefused.length, 'refused calls counted');
    assert.equal(refusedSpans, floodRefused * FLOOD_SPANS + engineRefused.length * ENGINE_SPANS);
    assert.ok(refusedShare <= refusedCalls);
    assert.equal(m.must('otelcol_exporter_enqueue_failed_spans', EXP), refusedSpans);
    assert.equal(accepted, (f.statuses.OK || 0) * FLOOD_SPANS + (ok + 1) * ENGINE_SPANS, 'accepted spans');
    // Exact accounting.
    assert.equal(accepted, sent + failed + queued, `accepted ${accepted} sent ${sent} failed ${failed} queued ${queued}`);
    assert.equal(failed, 0);
    // The share was visible while it applied: two clients, half the queue each.
    assert.ok(gauges, 'metrics read mid-run');
    assert.equal(gauges.must('spanfence_exporter_queue_clients', EXP), 2);
    assert.equal(gauges.must('spanfence_exporter_queue_share', EXP), QUEUE_SPANS / 2);

    await sf.stop();
    const st = await sink.stats();
    assert.equal(st.spans, sent, 'the sink got every span sent');
  });
});
