// tests/e2e/latency_guard.test.js: a trace-level window that watches its
// engine's latency (issue 35's latency guard). The stand-in engine's
// latency is SGLang's two histograms (time to first token, inter-token
// latency: names, label and buckets as SGLang's metrics collector has them),
// served by Debian's python3-prometheus-client (tests/e2e/latency_exposer.py)
// and scraped every second by a `prometheus` receiver; target r1 names that
// receiver and job in `engine_metrics`, and auto_revert.max_latency_increase
// is {ttft: 2x, itl: '+50ms', min_samples: 20}. It shows:
//  - TTFT worsening during a window (its p99 from the 100 ms bucket to the
//    4 s one) ends it with cause `latency` within two scrape intervals; the
//    close record, /status, `spanfence status` and the marker span carry
//    before and during (p50, p99 bucket-bounded, samples); the engine is
//    reset;
//  - a window whose latency stays flat runs to its end (`expired`), though
//    the guard saw enough samples;
//  - a window whose worse samples are fewer than min_samples is never ended
//    by it.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { Spanfence, harness, freePort, sleep, waitUntil } = require('./lib/spanfence');
const { engineCollector } = require('./lib/config');
const { Engine, control } = require('./lib/engine');
const { Gateway } = require('./lib/gateway');
const deps = require('./lib/deps');
const { startLatency } = require('./lib/engine_sources');

const SCRAPE_MS = 1000;

function config(opts) {
  return engineCollector({
    ...opts,
    tc: { auto_revert: { max_latency_increase: { ttft: '2x', itl: '+50ms', min_samples: 20 } } },
    r1: { engine_metrics: { receiver: 'prometheus/sglang', job: 'sglang', baseline_scrapes: 3 } },
  });
}

test('the latency guard: a window ends when its engine\'s latency rises, runs on when it is flat or the samples are few', async () => {
  await harness('latency_guard', async (h) => {
    const engine = new Engine();
    await engine.start();
    h.onCleanup(() => engine.stop());
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const dir = path.join(h.dir, 'latency');
    fs.mkdirSync(dir, { recursive: true });
    const ports = { grpc: await freePort(), metrics: await freePort(), exposer: await freePort() };
    const lat = await startLatency(h, ports.exposer);
    const sf = h.track(new Spanfence({
      dir: h.dir, name: 'latency', config: config({ dir, engine, gw, ...ports }),
      grpcPort: ports.grpc, metricsPort: ports.metrics,
    }));
    await sf.start();
    await engine.waitFor(() => engine.levels.length === 1, 'the resting level set at start');
    const sock = path.join(dir, 'tc.sock');
    const audit = path.join(dir, 'trace-audit.jsonl');

    const target = async () => {
      const st = await fetch(`http://127.0.0.1:${ports.metrics}/status`).then((r) => r.json());
      return st.extensions.find((e) => e.type === 'trace_control').status.targets[0];
    };
    let seen = null;
    const waitTarget = async (pred, what, timeoutMs = 30000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        seen = await target();
        if (pred(seen)) return seen;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(seen)}`);
        await sleep(50);
      }
    };
    // Two scrapes after now: the one under way when the exposer recorded
    // something may have read it before, the next one has it.
    const twoScrapes = async () => {
      const n = (await target()).engine_metrics.scrapes;
      return waitTarget((t) => t.engine_metrics.scrapes >= n + 2, `two scrapes after ${n}`);
    };
    const closes = () => (fs.existsSync(audit) ? fs.readFileSync(audit, 'utf8') : '').split('\n')
      .filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.event === 'close');
    const open = async (reason, forMs) => {
      const r = await control(sock, { op: 'set', target: 'r1', level: 3, for_ms: forMs, reason });
      assert.equal(r.ok, true, r.message);
      return waitTarget((t) => t.window && t.state === 'open', `window '${reason}' open`);
    };
    // a steady engine: fast first tokens (100 ms bucket), fast tokens (6 ms bucket)
    const steady = async () => {
      await lat.observe('ttft', 0.05, 30);
      await lat.observe('itl', 0.005, 30);
    };

    // The scrapes arrive and are read, window or not.
    await waitTarget((t) => t.engine_metrics && t.engine_metrics.scrapes >= 2, 'the first scrapes');
    assert.equal(seen.engine_metrics.job, 'sglang');
    assert.equal(seen.engine_metrics.restarts, 0);
    for (let i = 0; i < 3; i++) {
      await steady();
      await twoScrapes();
    }

    // 1. latency rises during the window: it ends, cause latency
    let w = await open('INC-1 worse', 600000);
    const before = w.window.latency;
    assert.match(before.note, /bucket-bounded/);
    assert.ok(before.ttft.before.samples >= 30, JSON.stringify(before));
    assert.equal(before.ttft.metric, 'sglang:time_to_first_token_seconds');
    assert.equal(before.ttft.before.p50_le, 0.1);
    assert.equal(before.ttft.before.p99_le, 0.1);
    assert.equal(before.itl.before.p99_le, 0.006);
    assert.equal(before.ttft.during.samples, 0);
    // flat at first: the guard looks and lets it run
    await steady();
    w = await waitTarget((t) => t.window && t.window.latency.ttft.during.samples === 30 &&
      t.window.latency.itl.during.samples === 30, 'the steady samples during the window');
    assert.equal(w.state, 'open');
    assert.equal(w.window.latency.ttft.during.p99_le, 0.1);
    await twoScrapes();
    assert.equal(seen.state, 'open', 'a flat latency does not end the window');
    // then TTFT worsens: 30 first tokens at 2.5 s (the 4 s bucket)
    const worse = Date.now();
    await lat.observe('ttft', 2.5, 30);
    w = await waitTarget((t) => t.last_window && t.last_window.cause === 'latency', 'the window ended by latency', 10000);
    await waitUntil(() => closes().length === 1, 'the close record');
    let close = closes()[0];
    assert.equal(close.cause, 'latency');
    process.stdout.write(`# the window ended ${Date.parse(close.end) - worse} ms after TTFT rose (scrape interval ${SCRAPE_MS} ms)\n`);
    assert.ok(Date.parse(close.end) - worse <= 2 * SCRAPE_MS,
      `ended ${Date.parse(close.end) - worse} ms after the latency rose (more than two scrape intervals)`);
    assert.match(close.revert_reason, /^ttft p99 rose to <= 4s from <= 100ms before the window \(bucket-bounded; max_latency_increase 2x: 200ms\), 60 samples during, \d+ before$/);
    assert.equal(close.latency.ttft.before.p99_le, 0.1);
    assert.equal(close.latency.ttft.during.samples, 60);
    assert.equal(close.latency.ttft.during.p50_le, 0.1);
    assert.equal(close.latency.ttft.during.p99_le, 4);
    assert.equal(close.latency.itl.during.samples, 30);
    assert.equal(close.latency.itl.during.p99_le, 0.006);
    assert.equal(w.last_window.latency.ttft.during.p99_le, 4);
    assert.equal(w.last_window.latency.ttft.during.samples, 60);
    await engine.waitFor(() => engine.levels[engine.levels.length - 1] === 0 && engine.levels.length === 3,
      'the engine set to 3, then reset to 0');
    await gw.waitFor(() => gw.spans.some((s) => s.resource['service.name'] === 'spanfence'), 'the marker span');
    const mk = gw.spans.find((s) => s.resource['service.name'] === 'spanfence');
    assert.equal(mk.attributes['spanfence.window.cause'], 'latency');
    assert.equal(mk.attributes['spanfence.window.latency.ttft.before.p99_le'], 0.1);
    assert.equal(mk.attributes['spanfence.window.latency.ttft.during.p99_le'], 4);
    assert.equal(Number(mk.attributes['spanfence.window.latency.ttft.during.samples']), 60);
    assert.equal(mk.attributes['spanfence.window.latency.itl.during.p99_le'], 0.006);
    // the operator's screen
    const env = { ...process.env };
    const screen = spawnSync(deps.spanfenceBin(), ['status', '--metrics', `127.0.0.1:${ports.metrics}`],
      { encoding: 'utf8', env, timeout: 60000 });
    assert.equal(screen.status, 0, `status: ${screen.error || ""} signal ${screen.signal} ${screen.stderr}`);
    assert.match(screen.stdout, /last window r1-\d+ \(latency, closed [^)]*\)/);
    assert.match(screen.stdout, /latency \(bucket-bounded, before -> during, \d+ scrapes\): ttft p50 <= 100ms -> <= 100ms, p99 <= 100ms -> <= 4s \(\d+ -> 60 samples\); itl p50 <= 6ms -> <= 6ms, p99 <= 6ms -> <= 6ms/);
    process.stdout.write(`# the screen after the latency guard ended a window:\n${screen.stdout}`);

    // 2. flat latency: the window runs to its end
    await steady();
    await twoScrapes();
    const FLAT_MS = 5000;
    w = await open('INC-2 flat', FLAT_MS);
    assert.ok(w.window.latency.ttft.before.samples >= 20, JSON.stringify(w.window.latency));
    await steady();
    await waitTarget((t) => t.window && t.window.latency.ttft.during.samples >= 30, 'steady samples during the flat window');
    await waitTarget((t) => t.last_window && t.last_window.id === w.window.id, 'the flat window closed', FLAT_MS + 10000);
    close = closes()[1];
    assert.equal(close.cause, 'expired', JSON.stringify(close));
    assert.ok(close.latency.ttft.during.samples >= 20, 'the guard had enough samples to judge');
    assert.equal(close.latency.ttft.during.p99_le, 0.1);

    // 3. worse, but fewer samples than min_samples: never ends it
    await steady();
    await twoScrapes();
    w = await open('INC-3 few', 600000);
    assert.ok(w.window.latency.ttft.before.samples >= 20, JSON.stringify(w.window.latency));
    await lat.observe('ttft', 2.5, 10);
    await waitTarget((t) => t.window && t.window.latency.ttft.during.samples === 10, 'the few slow samples');
    assert.equal(seen.window.latency.ttft.during.p99_le, 4, 'they are worse');
    await twoScrapes();
    assert.equal(seen.state, 'open', `10 samples, fewer than min_samples, ended it: ${JSON.stringify(seen)}`);
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    await waitUntil(() => closes().length === 3, 'the third close record');
    close = closes()[2];
    assert.equal(close.cause, 'reset');
    assert.equal(close.latency.ttft.during.samples, 10);
    assert.equal(close.latency.ttft.during.p99_le, 4);
    await sf.stop();
  });
});
