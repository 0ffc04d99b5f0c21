// tests/e2e/reclaim_grpc.test.js: memory pressure reclaims from whoever holds
// it (issue 33). 40 connections x 16 calls, each a message declaring 4 MiB
// of which 240 KiB (inside the stream window) is sent, then silence, every
// call the server ends opened again at once (h2_attack.py partial_hold):
// 150 MiB of partial messages against a 64 MiB memory limit. Beside it a
// well-behaved client makes 8-span calls at 10/s: >= 95 % of them are OK
// during the attack (the held partial messages are refused UNAVAILABLE and
// freed before a complete call is refused, counted in
// spanfence_receiver_reclaimed_*: at least what the attack held past the
// limit), every one after it; peak RSS stays within the limit + 32 MiB and
// received = accepted + refused.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { harness, waitUntil } = require('./lib/spanfence');
const deps = require('./lib/deps');
const flood = require('./lib/flood');
const fair = require('./lib/fair');

const PROBE_SPANS = 8;
const PROBE_EVERY_MS = 100;
const PROBE_DURING = 50;        // probe calls made while the attack holds memory
const PROBE_AFTER = 20;
const BOUND_S = 120;            // the attacker's upper bound; the test stops it sooner

test('partial gRPC messages held without progress pay for memory, not complete calls', async (t) => {
  await harness('reclaim_grpc', async (h) => {
    const limit = flood.LIMIT_MIB << 20;
    const { sf, sink, grpcPort } = await flood.startFlood(h, { limitMiB: flood.LIMIT_MIB, http: false });
    await sink.start();
    const probeFile = path.join(h.dir, 'probe.pb');
    execFileSync(deps.sendBin(), ['--write', probeFile, '--spans', String(PROBE_SPANS)], { stdio: 'pipe' });
    const body = fs.readFileSync(probeFile);
    assert.ok(fair.PARTIAL_HOLD.held > 2 * limit, 'the attack holds more than twice the limit');

    let phase = 'before';
    const p = fair.probe('grpc', grpcPort, body, PROBE_EVERY_MS, () => phase);
    h.onCleanup(() => p.stop());
    await waitUntil(() => p.calls.length >= 5, 'the probe started');
    const s = flood.sampler(sf);
    phase = 'attack';
    const meter = flood.cpuMeter(sf);
    const a = fair.partialHold(grpcPort, BOUND_S);
    h.onCleanup(() => a.stop().catch(() => {}));
    // The flood crossed the limit, and what it held past the limit was
    // reclaimed (counted memory never passes the hard limit); the probe went
    // on meanwhile.
    const past = fair.PARTIAL_HOLD.held - limit;
    const m = await sf.waitMetrics((x) => fair.reclaimed(x, 'grpc').bytes >= past,
      `${past} bytes reclaimed from the held partial messages`, 90000);
    await waitUntil(() => fair.tally(p.calls, 'attack').n >= PROBE_DURING, 'probe calls during the attack', 60000);
    assert.ok(a.running(), 'the attacker was still holding when the probe was counted');
    const st = await a.stop();
    const cpu = meter.stop();
    phase = 'after';
    const afterFrom = p.calls.length;
    await waitUntil(() => p.calls.length >= afterFrom + PROBE_AFTER, 'probe calls after the attack', 60000);
    await p.stop();
    const peaks = await s.stop();

    const during = fair.tally(p.calls, 'attack');
    const after = fair.tally(p.calls, 'after');
    const r = fair.reclaimed(m, 'grpc');
    t.diagnostic(`${flood.cpuText(cpu)}; ` +
      `attacker ${JSON.stringify(st)}; reclaimed ${r.requests} calls, ` +
      `${(r.bytes / 1048576).toFixed(0)} MiB; probe ${during.ok}/${during.n} OK during, ` +
      `${after.ok}/${after.n} after; peak RSS ${(peaks.peakRssKiB / 1024).toFixed(1)} MiB, counted ` +
      `${(peaks.peakCountedBytes / 1048576).toFixed(1)} MiB` +
      (Object.keys(during.failures).length ? `; failures ${JSON.stringify(during.failures)}` : ''));

    assert.ok(st.held_peak > limit, `the attacker held ${st.held_peak} bytes, more than the limit`);
    flood.assertCpu(t, cpu);
    assert.ok(during.ok >= 0.95 * during.n, `probe during the attack: ${during.ok}/${during.n} OK`);
    assert.equal(after.ok, after.n, `every probe call after the attack OK: ${JSON.stringify(after.failures)}`);
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: RSS bound not checked (it measures the sanitizer)');
    } else {
      assert.ok(peaks.peakRssKiB <= (flood.LIMIT_MIB + flood.RSS_SLACK_MIB) * 1024,
        `peak RSS ${peaks.peakRssKiB} KiB over ${flood.LIMIT_MIB} + ${flood.RSS_SLACK_MIB} MiB`);
    }
    // Accounting: every probe span accepted or refused, all accepted sent
    // (the attacker's messages, never complete, carry no span).
    const sent = p.calls.length * PROBE_SPANS;
    const fin = await sf.waitMetrics((x) => {
      const e = flood.exporterCounts(x);
      const c = flood.receiverCounts(x, 'grpc');
      return e.queued === 0 && e.sent === c.accepted && c.accepted + c.refusedTotal === sent;
    }, `received ${sent} = accepted + refused, all accepted sent`, 20000);
    await flood.assertSinkGot(t, sink, fin, flood.receiverCounts(fin, 'grpc').accepted);
    await sf.stop(20000);
  });
});
