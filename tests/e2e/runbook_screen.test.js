// tests/e2e/runbook_screen.test.js: the operator's one screen. The seed's
// runbook asks four questions while a level is raised: is the engine's
// latency moving, is the engine dropping spans, is the collector dropping
// spans, are the spans arriving at all. One collector reads the stand-in
// engine's three sources as SGLang makes them (lib/engine_sources.js: spans
// from the real OpenTelemetry JS SDK at SGLang's batch settings, its log in
// journal files written by systemd-journal-remote, its TTFT/ITL histograms
// from python3-prometheus-client), and target r1 names all three
// (match, engine_log, engine_metrics). With a window open, `spanfence
// status` answers each question on a line of its own, with the figures
// /status has; the screen is printed (pipeline/extensions/trace_control/
// README.md quotes a run of it).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { engineCollector } = require('./lib/config');
const { Engine, control } = require('./lib/engine');
const { Gateway } = require('./lib/gateway');
const deps = require('./lib/deps');
const { JOURNAL_REMOTE, zmqFull, journal, engineSpans, startLatency } = require('./lib/engine_sources');

function config(opts) {
  return engineCollector({
    ...opts,
    journal: ['sglang'],
    r1: {
      match: { 'service.instance.id': 'r1' },
      engine_log: { receiver: 'journald', match: { _SYSTEMD_UNIT: 'sglang.service' } },
      engine_metrics: { receiver: 'prometheus/sglang', job: 'sglang', baseline_scrapes: 3 },
      arrival_timeout: '1s',
    },
  });
}

test('one screen answers the runbook\'s four questions while a window is open', async () => {
  assert.ok(fs.existsSync(JOURNAL_REMOTE), `${JOURNAL_REMOTE} missing: run tools/setup.sh (systemd-journal-remote)`);
  await harness('runbook_screen', async (h) => {
    const engine = new Engine();
    await engine.start();
    h.onCleanup(() => engine.stop());
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const dir = path.join(h.dir, 'screen');
    fs.mkdirSync(path.join(dir, 'journal'), { recursive: true });
    const file = path.join(dir, 'journal', 'remote.journal');
    const ports = { grpc: await freePort(), metrics: await freePort(), exposer: await freePort() };
    const lat = await startLatency(h, ports.exposer);
    let lines = journal(file, [{ message: 'The server is fired up and ready to roll!' }]);
    const sf = h.track(new Spanfence({
      dir: h.dir, name: 'screen', config: config({ dir, engine, gw, ...ports }),
      grpcPort: ports.grpc, metricsPort: ports.metrics,
    }));
    await sf.start();
    await engine.waitFor(() => engine.levels.length === 1, 'the resting level set at start');
    const target = async () => {
      const st = await fetch(`http://127.0.0.1:${ports.metrics}/status`).then((r) => r.json());
      return st.extensions.find((e) => e.type === 'trace_control').status.targets[0];
    };
    const waitTarget = async (pred, what) => {
      let seen;
      for (const deadline = Date.now() + 30000; ;) {
        seen = await target();
        if (pred(seen)) return seen;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(seen)}`);
        await sleep(50);
      }
    };
    const scrapesAfterNow = async (k) => {
      const n = (await target()).engine_metrics.scrapes;
      return waitTarget((t) => t.engine_metrics.scrapes >= n + k, `${k} scrapes after ${n}`);
    };
    // a steady engine before the window: its baseline is the deltas of the
    // last 3 scrapes, and the last observations are in one of them
    for (let i = 0; i < 3; i++) {
      await lat.observe('ttft', 0.05, 10);
      await lat.observe('itl', 0.005, 10);
      await scrapesAfterNow(2);
    }

    const r = await control(path.join(dir, 'tc.sock'),
      { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-35 decode capture' });
    assert.equal(r.ok, true, r.message);
    // during it: spans, a drop line of SGLANG_TRACE_ASYNC=1, slower tokens
    const got = await engineSpans(ports.grpc, 200, 'decode');
    assert.equal(got.exported, 200);
    lines += journal(file, [{ message: zmqFull(17, 'rid-7') }]);
    await sf.waitMetrics((m) => m.get('otelcol_receiver_accepted_log_records',
      { receiver: 'journald', transport: '' }) === lines, 'the drop line read');
    await lat.observe('ttft', 0.15, 40);
    await lat.observe('itl', 0.007, 40);
    await scrapesAfterNow(2);
    const t = await waitTarget((x) => x.window && x.window.accepted_from_target === 200 &&
      x.window.engine_dropped === 1 && x.window.latency && x.window.latency.ttft.during.samples === 40,
      'the window\'s figures');
    assert.equal(t.window.arrival, 'arriving');

    const screen = spawnSync(deps.spanfenceBin(), ['status', '--metrics', `127.0.0.1:${ports.metrics}`],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(screen.status, 0, `status: ${screen.error || ""} signal ${screen.signal} ${screen.stderr}`);
    process.stdout.write(`--- spanfence status, window open ---\n${screen.stdout}---\n`);
    const out = screen.stdout;
    // arrival
    assert.match(out, /^ {4}spans from r1 arriving$/m);
    // the engine's own drops
    assert.match(out, /^ {4}the engine's own drops: it said 1 time in its log that it dropped spans \(17 trace ops counted; engine_log journald\): NOT complete$/m);
    // the collector's
    assert.match(out, /^ {4}window r1-\d+ at level 3, .*: 200 spans accepted, \d+ exported, 0 lost, \d+ queued; from the target 200 accepted, 0 refused$/m);
    assert.match(out, /^ {4}the collector: 0 of the window's spans lost, 0 collector-wide since it opened$/m);
    // latency, bucket-bounded: TTFT moved from the 100 ms bucket to the 200 ms one
    assert.match(out, /^ {4}latency \(bucket-bounded, before -> during, \d+ scrapes\): ttft p50 <= 100ms -> <= 200ms, p99 <= 100ms -> <= 200ms \([1-9]\d* -> 40 samples\); itl p50 <= 6ms -> <= 8ms, p99 <= 6ms -> <= 8ms \([1-9]\d* -> 40 samples\)$/m);
    assert.equal((await control(path.join(dir, 'tc.sock'), { op: 'reset', target: 'r1' })).ok, true);

    // A level that does not take: the engine runs requests (its gauges
    // say so) but no span comes. The screen says it within the window.
    const audit = path.join(dir, 'trace-audit.jsonl');
    for (const deadline = Date.now() + 30000; !fs.readFileSync(audit, 'utf8').includes('"event":"close"');) {
      if (Date.now() > deadline) throw new Error('no close record');
      await sleep(50);
    }
    await lat.load(3, 1);
    await scrapesAfterNow(2);
    const r2 = await control(path.join(dir, 'tc.sock'),
      { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-36 level check' });
    assert.equal(r2.ok, true, r2.message);
    const t2 = await waitTarget((x) => x.window && x.window.arrival === 'none', 'arrival none');
    assert.equal(t2.engine_metrics.running_reqs, 3);
    assert.equal(t2.engine_metrics.queued_reqs, 1);
    const screen2 = spawnSync(deps.spanfenceBin(), ['status', '--metrics', `127.0.0.1:${ports.metrics}`],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(screen2.status, 0, `status: ${screen2.error || ''} signal ${screen2.signal} ${screen2.stderr}`);
    process.stdout.write(`--- spanfence status, a level that did not take ---\n${screen2.stdout}---\n`);
    assert.match(screen2.stdout, /^ {4}no spans from r1 since the level was raised \d+s ago, while it runs 3 requests \(1 queued\): the level did not take, or check the engine's exporter$/m);
    assert.equal((await control(path.join(dir, 'tc.sock'), { op: 'reset', target: 'r1' })).ok, true);
  });
});
