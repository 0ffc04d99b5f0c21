// tests/e2e/capture_truth.test.js: a trace-level window that knows what the
// engine itself lost. One collector reads both the engine's spans (OTLP/gRPC,
// from the real OpenTelemetry JS SDK with SGLang's BatchSpanProcessor
// settings: queue 2048, batch 64, delay 500 ms) and its log (a `journald`
// receiver on journal files written by the real journal code,
// systemd-journal-remote); the target r1 names that receiver and its unit in
// `engine_log`. The logs pipeline's fence removes every body, yet the
// extension sees the engine's own words (the core's log tap is told before
// the processors). It shows, window after window:
//  - spans from r1 and nothing in its log: "complete" (the engine's side
//    was seen and said nothing);
//  - no span from r1 at all: "empty", not complete;
//  - a burst the SDK's queue cannot hold (it drops part of it, so the
//    stand-in engine writes the SDK's warning to its journal, as SGLang's
//    Python SDK does, and a ZMQ drop line of SGLANG_TRACE_ASYNC=1 with its
//    number): complete false with engine_dropped 2 (one unsized, 17 ops),
//    though the collector lost nothing; in the close record, /status and
//    the marker span;
//  - drop lines written before the window opened, or by another unit, do
//    not count; the text of the lines is in no log line of the collector.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { engineCollector, otlphttp } = require('./lib/config');
const { Engine, control } = require('./lib/engine');
const { Gateway } = require('./lib/gateway');

const { JOURNAL_REMOTE, SDK_QUEUE_FULL, zmqFull, journal, engineSpans } = require('./lib/engine_sources');

function config(opts) {
  return engineCollector({
    ...opts,
    journal: ['sglang', 'other'],
    tc: { auto_revert: { enabled: false } },
    r1: {
      match: { 'service.instance.id': 'r1' },
      engine_log: { receiver: 'journald', match: { _SYSTEMD_UNIT: 'sglang.service' } },
    },
  });
}

test('a window knows what the engine dropped: complete, empty, incomplete with engine_dropped', async () => {
  assert.ok(fs.existsSync(JOURNAL_REMOTE), `${JOURNAL_REMOTE} missing: run tools/setup.sh (systemd-journal-remote)`);
  await harness('capture_truth', async (h) => {
    const engine = new Engine();
    await engine.start();
    h.onCleanup(() => engine.stop());
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const dir = path.join(h.dir, 'truth');
    fs.mkdirSync(path.join(dir, 'journal'), { recursive: true });
    const file = path.join(dir, 'journal', 'remote.journal');
    const ports = { grpc: await freePort(), metrics: await freePort() };
    // a drop line from before any window: never counted
    let lines = journal(file, [{ message: zmqFull(999, 'rid-before') }]);
    const sf = h.track(new Spanfence({
      dir: h.dir, name: 'truth', config: config({ dir, engine, gw, ...ports }),
      grpcPort: ports.grpc, metricsPort: ports.metrics,
    }));
    await sf.start();
    await engine.waitFor(() => engine.levels.length === 1, 'the resting level set at start');
    const sel = { receiver: 'journald', transport: '' };
    const logsRead = (n, what) => sf.waitMetrics((m) => m.get('otelcol_receiver_accepted_log_records', sel) === n, what);
    await logsRead(lines, 'the line from before');
    const sock = path.join(dir, 'tc.sock');
    const audit = path.join(dir, 'trace-audit.jsonl');
    const closes = () => (fs.existsSync(audit) ? fs.readFileSync(audit, 'utf8') : '').split('\n').filter(Boolean)
      .map((l) => JSON.parse(l)).filter((r) => r.event === 'close');
    const nextClose = async (n) => {
      const deadline = Date.now() + 60000;
      while (closes().length < n) {
        if (Date.now() > deadline) throw new Error(`no close record ${n}: ${fs.readFileSync(audit, 'utf8')}`);
        await sleep(50);
      }
      return closes()[n - 1];
    };
    const window = async (reason, during) => {
      const r = await control(sock, { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason });
      assert.equal(r.ok, true, r.message);
      await during();
      assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    };

    // 1. spans from r1, its log quiet (but for a line of another unit): complete
    let got;
    await window('INC-1 quiet', async () => {
      got = await engineSpans(ports.grpc, 100, 'quiet');
      lines += journal(file, [{ unit: 'other.service', message: SDK_QUEUE_FULL }]);
      await logsRead(lines, 'the other unit\'s line');
    });
    assert.deepEqual(got, { made: 100, exported: 100 });
    let close = await nextClose(1);
    assert.equal(close.accepted_from_target, 100);
    assert.equal(close.lost, 0);
    assert.equal(close.engine_log, 'journald');
    assert.equal(close.engine_dropped, 0, JSON.stringify(close));
    assert.equal(close.capture, 'complete');
    assert.equal(close.complete, true);

    // 2. nothing from r1: empty, not complete
    await window('INC-2 silent', async () => {});
    close = await nextClose(2);
    assert.equal(close.accepted_from_target, 0);
    assert.equal(close.lost, 0);
    assert.equal(close.capture, 'empty', JSON.stringify(close));
    assert.equal(close.complete, false);

    // 3. a burst the SDK's queue cannot hold: the engine drops, says so in
    //    its log, and the window is not complete though the collector lost nothing
    await window('INC-3 burst', async () => {
      got = await engineSpans(ports.grpc, 5000, 'burst');
      assert.ok(got.exported < got.made, `the SDK dropped nothing (${got.exported} of ${got.made}): no burst`);
      lines += journal(file, [
        { message: SDK_QUEUE_FULL },                 // the SDK says it once, of unknown size
        { message: zmqFull(17, 'rid-3') },           // SGLANG_TRACE_ASYNC=1
        { message: '[2026-12-06 07:00:00 TP0] Decode batch. #running-req: 1' },
      ]);
      await logsRead(lines, 'the engine\'s drop lines');
      const st = await fetch(`http://127.0.0.1:${ports.metrics}/status`).then((r) => r.json());
      const t = st.extensions.find((e) => e.type === 'trace_control').status.targets[0];
      assert.equal(t.window.engine_dropped, 2, JSON.stringify(t.window));
      assert.equal(t.window.engine_dropped_ops, 17);
    });
    close = await nextClose(3);
    assert.equal(close.accepted_from_target, got.exported, 'the collector took all the SDK sent');
    assert.equal(close.exported, got.exported);
    assert.equal(close.lost, 0, 'nothing lost at the collector');
    assert.equal(close.engine_dropped, 2, JSON.stringify(close));
    assert.equal(close.engine_dropped_unsized, 1);
    assert.equal(close.engine_dropped_ops, 17);
    assert.equal(close.complete, false);
    assert.equal(close.capture, 'incomplete');
    // /status shows a window once the control thread has published it,
    // just after its close record: wait for that one
    let last = null;
    for (const deadline = Date.now() + 30000; !(last && last.id === close.window);) {
      if (Date.now() > deadline) throw new Error(`status never showed window ${close.window}: ${JSON.stringify(last)}`);
      const st = await fetch(`http://127.0.0.1:${ports.metrics}/status`).then((r) => r.json());
      last = st.extensions.find((e) => e.type === 'trace_control').status.targets[0].last_window;
      if (!(last && last.id === close.window)) await sleep(50);
    }
    assert.equal(last.engine_dropped, 2);
    assert.equal(last.capture, 'incomplete');
    await gw.waitFor(() => gw.spans.filter((s) => s.resource['service.name'] === 'spanfence').length === 3, 'three markers');
    const mk = gw.spans.filter((s) => s.resource['service.name'] === 'spanfence');
    assert.deepEqual(mk.map((s) => s.attributes['spanfence.window.capture']), ['complete', 'empty', 'incomplete']);
    assert.equal(mk[2].attributes['spanfence.window.engine_dropped'], 2);
    assert.equal(mk[2].attributes['spanfence.window.engine_dropped_ops'], 17);
    assert.equal(mk[2].status.code, 2, 'an incomplete capture is an error span');
    await sf.stop();
    assert.doesNotMatch(sf.stderr(), /Queue is full|ZMQ send buffer|rid-3/, 'the engine\'s words stay in the extension');
  });
});

// The "next window charged for an earlier loss": spans queued
// before a window opens (here: another engine's, while the gateway answers
// 503) and lost while it runs are the collector's loss, shown beside the
// window's own (lost_collector, queued_before), not the window's: its own
// spans all arrive and it is complete.
test('a window is charged only for its own spans: an earlier backlog lost meanwhile is shown beside them', async () => {
  const { tcSetup } = require('./lib/tc_fixture');
  const peers = require('./lib/peers');
  await harness('capture_truth', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    gw.setStatus(503);
    const { sf, sock, waitRecords } = await tcSetup(h, 'backlog', {
      exporters: { otlphttp: otlphttp(gw.url, { retry_on_failure: { initial_interval: '100ms', max_interval: '200ms', max_elapsed_time: '3s' } }) },
    });
    const client = new peers.RawClient(sf.grpcPort);
    h.onCleanup(() => client.close());
    const EXP = { exporter: 'otlphttp' };
    // 20 spans of no window, queued and retried against the 503s
    assert.equal((await client.call(peers.serializedSpans(20, 'before').bytes)).code, peers.status.OK);
    const r = await control(sock, { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-4 backlog' });
    assert.equal(r.ok, true, r.message);
    // they are lost while the window runs
    await sf.waitMetrics((m) => m.get('otelcol_exporter_send_failed_spans', EXP) === 20, 'the backlog lost', 30000);
    // and the window has seen its backlog leave (/status): what leaves from
    // now on is its own (a loss it cannot tell apart is charged to it)
    for (const deadline = Date.now() + 30000; ;) {
      const st = await fetch(`http://127.0.0.1:${sf.metricsPort}/status`).then((r) => r.json());
      const win = st.extensions.find((e) => e.type === 'trace_control').status.targets[0].window;
      assert.equal(win.queued_before, 20, JSON.stringify(win));
      if (win.queued_before_left) break;
      if (Date.now() > deadline) throw new Error(`the window never saw its backlog leave: ${JSON.stringify(win)}`);
      await sleep(50);
    }
    gw.setStatus(200);
    assert.equal((await client.call(peers.serializedSpans(10, 'own').bytes)).code, peers.status.OK);
    await gw.waitFor(() => gw.spans.filter((s) => s.name.startsWith('own ')).length === 10, 'the window\'s 10 spans');
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    const recs = await waitRecords((x) => x.some((y) => y.event === 'close'), 'the close record');
    const close = recs.find((x) => x.event === 'close');
    assert.equal(close.queued_before, 20, `the backlog was not queued when the window opened: ${JSON.stringify(close)}`);
    assert.equal(close.accepted, 10);
    assert.equal(close.exported, 10);
    assert.equal(close.lost, 0, 'the earlier backlog is not the window\'s loss');
    assert.equal(close.lost_collector, 20, 'the collector-wide loss, beside it');
    assert.equal(close.queued, 0);
    assert.equal(close.capture, 'complete at the collector');
    assert.equal(close.complete, true);
  });
});
