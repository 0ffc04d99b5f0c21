// tests/e2e/signals_trace_control.test.js: trace_control under SIGHUP and
// with an audit log that cannot be written.
//  - A window open across a reload is not touched: the engine is neither
//    reset nor set again, the window keeps its id and end, the socket keeps
//    answering, and the audit log gets no closing record until the window
//    really closes.
//  - A window in its grace period keeps it across a reload: its closing
//    record, counting spans that arrived after the reload, and its marker
//    span come after.
//  - The audit log unwritable (its directory replaced by a file: the tests
//    run as root, where a chmod would not stop a write): `reset` still puts
//    the engine back but does not report success; the records are pending
//    (a gauge), retried, and written once the log is back; no window opens
//    meanwhile, and a reload keeps them; SIGTERM with records still missing
//    exits 1 and logs them.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { Engine, control } = require('./lib/engine');
const { tcConfig, tcSetup } = require('./lib/tc_fixture');

const config = tcConfig;
const setup = tcSetup;

// At start the collector sets the engine (at SGLang's default 3) to the
// resting level: wait for it, then forget it.
async function atRest(engine) {
  await engine.waitFor(() => engine.levels.length === 1, 'the resting level set at start');
  assert.deepEqual(engine.levels, [0]);
  engine.levels.length = 0;
}

const set = (sock, forMs = 600000) => control(sock, { op: 'set', target: 'r1', level: 3, for_ms: forMs, reason: 'INC-1 e2e' });

test('a window open across SIGHUP is not touched', async () => {
  await harness('signals_trace_control', async (h) => {
    const { engine, dir, sf, sock, records } = await setup(h, 'reload');
    const engine2 = new Engine();
    await engine2.start();
    h.onCleanup(() => engine2.stop());
    const r = await set(sock);
    assert.equal(r.ok, true, r.message);
    assert.deepEqual(engine.levels, [3]);
    const before = await control(sock, { op: 'status' });
    assert.equal(before.windows.length, 1);
    const inode = fs.statSync(sock).ino;

    fs.writeFileSync(sf.configPath, config({ dir, engine, extraTarget: engine2 }));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload');
    assert.match(sf.stderr(), /window '[^']+' on target 'r1' kept across the reload/);

    assert.equal(fs.statSync(sock).ino, inode, 'the control socket stayed bound (not unlinked and bound again)');
    const after = await control(sock, { op: 'status' });
    assert.equal(after.ok, true);
    assert.equal(after.windows.length, 1);
    for (const k of ['target', 'state', 'level', 'window', 'planned_end', 'reason', 'uid']) {
      assert.equal(after.windows[0][k], before.windows[0][k], `window ${k} kept`);
    }
    // The reload's own work on the targets is done when the new target has
    // been set to its resting level: a reset of r1 by the reload would have
    // been sent by then (no sleep standing in for it).
    await engine2.waitFor(() => engine2.levels.length === 1, 'the new target set to its resting level');
    assert.deepEqual(engine.levels, [3], 'the reload neither reset nor set the engine');
    assert.deepEqual(engine2.levels, [0]);
    assert.deepEqual(records().map((x) => x.event), ['open'], 'no closing record at the reload');
    const m = await sf.metrics();
    assert.equal(m.must('spanfence_trace_control_open_windows'), 1);

    const reset = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(reset.ok, true, reset.message);
    assert.deepEqual(engine.levels, [3, 0]);
    const recs = records();
    assert.deepEqual(recs.map((x) => x.event), ['open', 'close', 'reset']);
    assert.equal(recs[1].cause, 'reset');
    assert.equal(new Set(recs.map((x) => x.window)).size, 1, 'one window throughout');
    await sf.stop();
    assert.deepEqual(engine.levels, [3, 0], 'nothing left to reset at exit');
  });
});

test('a window in its grace period across SIGHUP keeps it: its closing record and marker come after the reload', async () => {
  const peers = require('./lib/peers');
  await harness('signals_trace_control', async (h) => {
    // The grace period must outlast what the test does inside it (a reload and
    // one call): 20 s is a margin for a machine with both cores busy, not a
    // rate; the close record is waited for, not timed.
    const { engine, dir, sf, sock, records } = await setup(h, 'grace', { grace: '20s' });
    assert.equal((await set(sock, 300)).ok, true);
    await engine.waitFor(() => engine.levels.length === 2, 'the window expired and the engine reset');
    assert.deepEqual(engine.levels, [3, 0]);
    const deadline0 = Date.now() + 30000;
    while (records().length < 2 && Date.now() < deadline0) await sleep(20);
    assert.deepEqual(records().map((x) => x.event), ['open', 'reset'], 'the closing record waits for the grace period');
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload');
    assert.match(sf.stderr(), /window '[^']+' on target 'r1' kept across the reload/);
    // a span of a request admitted during the window, arriving in its grace period
    const client = new peers.RawClient(sf.grpcPort);
    h.onCleanup(() => client.close());
    assert.equal((await client.call(peers.serializedSpans(2, 'late').bytes)).code, peers.status.OK);
    const deadline = Date.now() + 60000;
    while (!records().some((x) => x.event === 'close') && Date.now() < deadline) await sleep(50);
    const recs = records();
    assert.deepEqual(recs.map((x) => x.event), ['open', 'reset', 'close']);
    assert.equal(recs[2].cause, 'expired');
    assert.equal(recs[2].grace_ms, 20000);
    assert.equal(recs[2].accepted, 2);
    assert.equal(recs[2].marker, 'sent');
    assert.deepEqual(engine.levels, [3, 0], 'the reload did not touch the engine');
    await sf.stop();
    const out = fs.readFileSync(path.join(dir, 'out.jsonl'), 'utf8');
    assert.equal((out.match(/"trace_control window r1"/g) || []).length, 1, 'one marker span in the capture');
    assert.match(out, /"key":"spanfence\.window\.cause","value":\{"stringValue":"expired"\}/);
  });
});

test('an audit log that cannot be written: reset and SIGTERM do not report success', async () => {
  await harness('signals_trace_control', async (h) => {
    const { engine, dir, sf, sock, records } = await setup(h, 'audit');
    const auditDir = path.join(dir, 'audit');
    const away = path.join(dir, 'audit.away');
    const breakLog = () => { fs.renameSync(auditDir, away); fs.writeFileSync(auditDir, 'not a directory'); };
    const mendLog = () => { fs.unlinkSync(auditDir); fs.renameSync(away, auditDir); };

    assert.equal((await set(sock)).ok, true);
    breakLog();
    const reset = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(reset.ok, false, 'reset must not report success with its records missing');
    assert.match(reset.message, /back at level 0, but the audit log .* cannot be written: 2 records pending/);
    assert.deepEqual(engine.levels, [3, 0], 'the engine is still put back');
    let m = await sf.metrics();
    assert.equal(m.must('spanfence_trace_control_audit_pending'), 2);
    assert.match(sf.stderr(), /audit record not written yet .*"event":"close"/);

    const refused = await set(sock);
    assert.equal(refused.ok, false);
    assert.match(refused.message, /cannot be written; nothing was changed/);
    assert.deepEqual(engine.levels, [3, 0], 'no window opens while records are pending');

    // A reload meanwhile: the collector keeps running (the log cannot even
    // be read) and the pending records go to the new instance.
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload with the log broken');
    m = await sf.metrics();
    assert.equal(m.must('spanfence_trace_control_audit_pending'), 2, 'pending records kept across the reload');

    mendLog();
    m = await sf.waitMetrics((x) => x.get('spanfence_trace_control_audit_pending') === 0, 'pending records written', 20000);
    assert.deepEqual(records().map((x) => x.event), ['open', 'close', 'reset']);

    // Missing at SIGTERM: exit 1, every record logged.
    assert.equal((await set(sock)).ok, true);
    breakLog();
    const res = await sf.signalAndWait('SIGTERM', 30000);
    assert.deepEqual(res, { code: 1, signal: null }, 'SIGTERM with audit records missing is not a clean exit');
    assert.deepEqual(engine.levels, [3, 0, 3, 0]);
    assert.match(sf.stderr(), /audit record LOST: .*"event":"close".*"cause":"shutdown"/);
    assert.match(sf.stderr(), /audit record LOST: .*"event":"reset"/);
    assert.match(sf.stderr(), /stopped, but 2 trace_control audit records could not be written/);
    mendLog();
    assert.deepEqual(records().map((x) => x.event), ['open', 'close', 'reset', 'open']);
  });
});

test('a new config that cannot start (its port is taken): the previous one runs again, window and queue kept', async () => {
  const net = require('node:net');
  const { Gateway } = require('./lib/gateway');
  const peers = require('./lib/peers');
  await harness('signals_trace_control', async (h) => {
    const engine = new Engine();
    await engine.start();
    h.onCleanup(() => engine.stop());
    const gw = new Gateway();
    await gw.start();
    await gw.stop();    // down: what is accepted stays queued
    h.onCleanup(() => gw.stop());
    const taken = net.createServer();
    await new Promise((r) => taken.listen(0, '127.0.0.1', r));
    h.onCleanup(() => new Promise((r) => taken.close(r)));
    const dir = path.join(h.dir, 'fallback');
    fs.mkdirSync(path.join(dir, 'audit'), { recursive: true });
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const cfg = (port) => config({
      dir, engine, grpc: port,
      exporters: {
        otlphttp: {
          endpoint: `http://127.0.0.1:${gw.port}`,
          retry_on_failure: { initial_interval: '100ms', max_interval: '300ms', max_elapsed_time: '120s' },
        },
      },
    });
    const sf = h.track(new Spanfence({
      dir: h.dir,
      name: 'fallback',
      config: cfg(grpcPort),
      env: { SF_METRICS_PORT: String(metricsPort) },
      grpcPort,
      metricsPort,
    }));
    await sf.start();
    await atRest(engine);
    const sock = path.join(dir, 'tc.sock');
    assert.equal((await set(sock)).ok, true);
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());
    const { bytes, spanIds } = peers.serializedSpans(30, 'fb');
    assert.equal((await client.call(bytes)).code, peers.status.OK);

    fs.writeFileSync(sf.configPath, cfg(taken.address().port));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/running with the previous configuration/, 'the fallback');
    assert.match(sf.stderr(), /reload: the new configuration could not start; starting the previous one again/);

    const m = await sf.metrics();
    const EXP = { exporter: 'otlphttp' };
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp' }), 30);
    assert.equal(m.must('spanfence_exporter_queued_spans', EXP), 30, 'the queued spans went through both handovers');
    assert.equal(m.must('otelcol_exporter_send_failed_spans', EXP), 0);
    assert.equal(m.must('spanfence_trace_control_open_windows'), 1);
    assert.deepEqual(engine.levels, [3], 'the engine was not touched');
    const st = await control(sock, { op: 'status' });
    assert.equal(st.windows.length, 1);
    assert.equal(st.windows[0].state, 'open');

    // Still serving on the first port, and the queue drains to the gateway.
    assert.equal((await client.call(peers.serializedSpans(5, 'fb2').bytes)).code, peers.status.OK);
    await gw.start();
    await gw.waitForSpans(35, 30000);
    const got = new Set(gw.spans.map((s) => s.spanId));
    for (const id of spanIds) assert.ok(got.has(id), `span ${id} accepted before the failed reload was lost`);
    await sf.stop();
    assert.deepEqual(engine.levels, [3, 0]);
  });
});
