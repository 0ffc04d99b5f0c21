// tests/e2e/window_arrival.test.js: a capture that tells the truth about
// what the engine sent (issue #35), against the stand-in engine and the
// real OpenTelemetry SDK exporting over OTLP/gRPC:
//  - out of band: with configs/cvm.yaml's out_of_band setting (drop), the
//    spans of a resting engine whose level was raised by someone else
//    (SGLang's /set_trace_level has no authentication) never reach the
//    gateway; they are counted (the receiver's dropped spans, reason
//    out_of_band, on /metrics and /status; the target's out_of_band_spans;
//    an out_of_band record), and the next window's record is its own: its
//    spans all arrive, nothing of the dropped ones is charged to it;
//  - arrival: a window whose engine took the level but sends nothing shows
//    arrival `none` on /status (and the status screen says so) while it is
//    still open, warned and audited once; spans then arriving flip it to
//    `arriving`.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { harness, sleep } = require('./lib/spanfence');
const { otlphttp } = require('./lib/config');
const { control } = require('./lib/engine');
const { tcSetup } = require('./lib/tc_fixture');
const { Gateway } = require('./lib/gateway');
const { makeExporter } = require('./lib/senders');
const peers = require('./lib/peers');
const deps = require('./lib/deps');

// configs/cvm.yaml's trace_control block (commented out there: uncommenting
// it enables it), its target's out_of_band setting
function cvmOutOfBand() {
  const text = fs.readFileSync(path.join(process.env.SF_SOURCE_DIR, 'configs', 'cvm.yaml'), 'utf8');
  const block = text.slice(text.indexOf('# extensions:\n#   trace_control:'));
  const m = block.match(/^# +out_of_band: (\w+)$/m);
  assert.ok(m, 'configs/cvm.yaml: no out_of_band in its trace_control block');
  return m[1];
}

async function status(sf) {
  return fetch(`http://127.0.0.1:${sf.metricsPort}/status`).then((r) => r.json());
}

const r1Of = (doc) => doc.extensions.find((e) => e.type === 'trace_control')
  .status.targets.find((t) => t.target === 'r1');

// Polls /status until pred(doc) holds (bounded).
async function waitStatus(sf, pred, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const doc = await status(sf);
    if (pred(doc)) return doc;
    if (Date.now() > deadline) throw new Error(`/status never showed ${what}: ${JSON.stringify(r1Of(doc))}`);
    await sleep(50);
  }
}

async function setup(h, name) {
  const gw = new Gateway();
  await gw.start();
  h.onCleanup(() => gw.stop());
  const fx = await tcSetup(h, name, {
    match: true,
    r1: { out_of_band: cvmOutOfBand(), arrival_timeout: '1s' },
    exporters: { otlphttp: otlphttp(gw.url) },
  });
  const engineSpans = (n, prefix) => peers.sendSpansThrough(makeExporter('grpc', { grpcPort: fx.sf.grpcPort }),
    { n, prefix, resource: { 'service.instance.id': 'r1' } });
  return { gw, engineSpans, ...fx };
}

test('out of band under cvm.yaml\'s setting: counted, not exported, and not charged to the next window', async () => {
  assert.equal(cvmOutOfBand(), 'drop', 'configs/cvm.yaml keeps out-of-band spans in the VM');
  await harness('window_arrival', async (h) => {
    const { gw, engine, sf, sock, waitRecords, lines, engineSpans } = await setup(h, 'oob');
    const RCV = { receiver: 'otlp', transport: 'grpc' };
    // r1 rests once its resting level is recorded (the enforce record)
    for (const deadline = Date.now() + 30000; !lines().some((l) => l.includes('"event":"enforce"'));) {
      if (Date.now() > deadline) throw new Error('no enforce record');
      await sleep(50);
    }
    // someone raises r1's level behind the collector's back: the engine sends
    const raised = await fetch(`${engine.url}?level=3`);
    assert.equal(raised.status, 200);
    engine.levels.length = 0;
    await engineSpans(20, 'oob');
    let m = await sf.waitMetrics((x) => x.get('spanfence_receiver_dropped_spans', { ...RCV, reason: 'out_of_band' }) === 20,
      '20 spans dropped out of band');
    assert.equal(m.must('otelcol_receiver_accepted_spans', RCV), 0, 'not accepted');
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp' }), 0, 'not exported');
    // the control thread records them and sets the resting level again
    // (at most one record a second: the SDK's batches may be told in two)
    const oobOf = (r) => r.filter((x) => x.event === 'out_of_band');
    const recs = await waitRecords((r) => oobOf(r).reduce((a, x) => a + x.spans, 0) === 20, 'the out_of_band records');
    assert.ok(oobOf(recs).every((x) => x.dropped === true), JSON.stringify(oobOf(recs)));
    await engine.waitFor(() => engine.levels.includes(0), 'the resting level set again');
    let doc = await waitStatus(sf, (d) => r1Of(d).out_of_band_spans === 20, 'the target\'s out-of-band spans');
    assert.equal(r1Of(doc).out_of_band, 'drop');
    assert.equal(doc.spans.dropped.out_of_band, 20, JSON.stringify(doc.spans));
    assert.equal(doc.spans.lost, 0, 'dropped on purpose, not lost');
    assert.equal(doc.receivers.find((r) => r.id === 'otlp' && r.transport === 'grpc').dropped.out_of_band, 20);
    // one warning a record: the SDK's batches may be told in two (the records sum to 20 above)
    await sf.waitLog(/warn +trace_control: \d+ spans from target 'r1' while no window is open: .* \(the spans were dropped: out_of_band: drop\)/,
      'the warning');

    // a window: r1's spans leave, and its record is its own
    const r = await control(sock, { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-35 after oob' });
    assert.equal(r.ok, true, r.message);
    await engineSpans(10, 'own');
    await gw.waitFor(() => gw.spans.filter((s) => s.name.startsWith('own ')).length === 10, 'the window\'s 10 spans');
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    const all = await waitRecords((x) => x.some((y) => y.event === 'close'), 'the close record');
    const close = all.find((x) => x.event === 'close');
    assert.equal(close.accepted, 10, JSON.stringify(close));
    assert.equal(close.exported, 10);
    assert.equal(close.lost, 0, 'the out-of-band spans are not the window\'s loss');
    assert.equal(close.accepted_from_target, 10);
    assert.equal(close.complete, true);
    m = await sf.metrics();
    assert.equal(m.must('spanfence_receiver_dropped_spans', { ...RCV, reason: 'out_of_band' }), 20, 'in-window spans are not dropped');
    assert.equal(gw.spans.filter((s) => s.name.startsWith('oob ')).length, 0, 'no out-of-band span reached the gateway');
    assert.ok(gw.requests.every((q) => q.spans > 0), `an empty request reached the gateway: ${JSON.stringify(gw.requests.map((q) => q.spans))}`);
  });
});

test('a window whose engine sends nothing shows arrival none before it ends; spans then flip it to arriving', async () => {
  await harness('window_arrival', async (h) => {
    const { sf, sock, waitRecords, engineSpans } = await setup(h, 'arrival');
    const r = await control(sock, { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-35 silent' });
    assert.equal(r.ok, true, r.message);
    let doc = await status(sf);
    // waiting until arrival_timeout (1s) has passed, however slow this turn was
    const first = r1Of(doc).window;
    assert.equal(first.arrival, first.since_open_ms < 1000 ? 'waiting' : 'none', JSON.stringify(first));
    doc = await waitStatus(sf, (d) => r1Of(d).window && r1Of(d).window.arrival === 'none', 'arrival none');
    const t = r1Of(doc);
    assert.equal(t.state, 'open', 'said within the window');
    assert.ok(t.window.left_ms > 500000, JSON.stringify(t.window));
    assert.ok(t.window.since_open_ms >= 1000, JSON.stringify(t.window));
    await sf.waitLog(/warn +trace_control: window 'r1-\d+': no spans from target 'r1' since the level was raised to 3 \d+s ago: check the engine's exporter/,
      'the warning');
    const recs = await waitRecords((x) => x.some((y) => y.event === 'no_arrival'), 'the no_arrival record');
    assert.equal(recs.find((y) => y.event === 'no_arrival').level, 3);
    // the screen says it plainly
    const screen = spawnSync(deps.spanfenceBin(), ['status', '--metrics', `127.0.0.1:${sf.metricsPort}`],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(screen.status, 0, `status: ${screen.error || ""} signal ${screen.signal} ${screen.stderr}`);
    assert.match(screen.stdout, /^ {4}no spans from r1 since the level was raised \d+s ago: check the engine's exporter$/m);
    // and so does `trace-level status` (the control socket)
    const ts = await control(sock, { op: 'status' });
    assert.equal(ts.windows.find((w) => w.target === 'r1').arrival, 'none', JSON.stringify(ts));
    assert.match(ts.message, /^r1: .*; no spans from r1 since the level was raised \d+s ago: check the engine's exporter$/m);

    await engineSpans(5, 'late');
    doc = await waitStatus(sf, (d) => r1Of(d).window.arrival === 'arriving', 'arrival arriving');
    assert.equal(r1Of(doc).window.accepted_from_target, 5);
    await sf.waitLog(/info +trace_control: window 'r1-\d+': spans from target 'r1' arriving/, 'the flip logged');
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    const all = await waitRecords((x) => x.some((y) => y.event === 'close'), 'the close record');
    assert.equal(all.filter((y) => y.event === 'no_arrival').length, 1, 'said once');
  });
});
