// tests/e2e/trace_control_sglang.test.js: trace_control against a stand-in
// that implements SGLang's /set_trace_level handler exactly (lib/engine.js:
// GET or POST, query `level`, 400 on a bad level, optional Bearer key
// answering 401, 200 `success`), with the real binary and, where spans
// matter, the mock OTLP/HTTP gateway as the sink:
//  - the API key header comes from the environment, and is in no log and
//    no audit record; a wrong key (401) and a bad level (400) are reported
//    at once with the status and the engine's body, and block nothing; a
//    reset refused with 401 is recorded `reset_failed` at once, and is not
//    retried across a restart; `reset` clears it once the key is right;
//  - https engines: tls.ca_file and insecure_skip_verify work, a
//    certificate the system CAs do not know is a permanent failure;
//  - a reset the engine never takes (503) ends in `reset_failed` after
//    reset_timeout;
//  - the resting level is enforced at start (the engine runs at SGLang's
//    default 3) and again after the engine restarts at 3, recorded once per
//    change, not per round; the level metric follows;
//  - a window ends early when the capture loses more spans than allowed
//    (auto_revert), the engine is reset and the reason written;
//  - the closing record waits for the grace period and counts spans sent
//    after the window ended;
//  - each window's marker span arrives at the gateway, after the
//    allowlist, with the window's counts and whether it is complete;
//  - a window a crash left open is reset at the next start, and its marker
//    (cause recovered, no counts) reaches the gateway once the exporters run;
//  - `--direct` writes its outcome (applied, refused with the status,
//    failed) as its own record.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');

const { collectorConfig, otlpReceiver, otlphttp, envPort, traceControl, allowlist } = require('./lib/config');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { Engine, control } = require('./lib/engine');
const { Gateway } = require('./lib/gateway');
const peers = require('./lib/peers');
const deps = require('./lib/deps');

const KEY = 'sk-e2e-4f1d7c0a9b';        // the engine's --api-key
const WRONG = 'sk-e2e-wrong-77e3';

// targets: {id: {url, headers, field, method, tls}}; tc: more trace_control
// settings.
function config({ dir, targets, gateway = null, tc = {} }) {
  const t = Object.fromEntries(Object.entries(targets).map(([id, o]) => [id, {
    endpoint: o.url,
    method: o.method,
    field: o.field,
    headers: o.headers ? { Authorization: o.headers } : undefined,
    tls: o.tls,
  }]));
  const exporters = gateway
    ? { otlphttp: otlphttp(gateway.url, {
      retry_on_failure: { initial_interval: '100ms', max_interval: '300ms', max_elapsed_time: '20s' } }) }
    : { file: { path: path.join(dir, 'out.jsonl') } };
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC') }) },
    processors: {
      'transform/allowlist': allowlist({ resource: ['service.name'], span: ['gen_ai.request.id'] }),
    },
    exporters,
    extensions: {
      trace_control: traceControl(dir, {
        request_timeout: '5s',
        shutdown_timeout: '5s',
        retry_on_failure: { initial_interval: '50ms', max_interval: '200ms' },
        ...tc,
        targets: t,
      }),
    },
    serviceExtensions: ['trace_control'],
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], processors: ['transform/allowlist'], exporters: Object.keys(exporters) },
    },
  });
}

async function start(h, name, opts, env = {}) {
  const dir = path.join(h.dir, name);
  fs.mkdirSync(dir, { recursive: true });
  const grpcPort = await freePort();
  const metricsPort = await freePort();
  const sf = h.track(new Spanfence({
    dir: h.dir,
    name,
    config: config({ dir, ...opts }),
    env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort), ...env },
    grpcPort,
    metricsPort,
  }));
  await sf.start();
  const audit = path.join(dir, 'trace-audit.jsonl');
  const records = () => (fs.existsSync(audit) ? fs.readFileSync(audit, 'utf8') : '')
    .split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return { sf, dir, grpcPort, sock: path.join(dir, 'tc.sock'), audit, records };
}

async function waitRecords(records, pred, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = records();
    if (pred(r)) return r;
    if (Date.now() > deadline) throw new Error(`timed out waiting for audit records: ${what}\n${JSON.stringify(r, null, 1)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

const set = (sock, target, forMs = 600000, reason = 'INC-7 e2e capture') =>
  control(sock, { op: 'set', target, level: 3, for_ms: forMs, reason });

function run(args, env = {}) {
  return new Promise((resolve) => {
    execFile(deps.spanfenceBin(), ['trace-level', ...args], { env: { ...process.env, ...env }, timeout: 60000 },
      (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
  });
}

test('api key from the environment; 401 and 400 reported at once and blocking nothing', async () => {
  await harness('trace_control_sglang', async (h) => {
    const good = new Engine({ apiKey: KEY });
    const other = new Engine({ apiKey: KEY });
    for (const e of [good, other]) { await e.start(); h.onCleanup(() => e.stop()); }
    const targets = {
      r1: { url: good.url, headers: 'Bearer ${env:SGLANG_API_KEY}' },
      r2: { url: other.url, headers: 'Bearer ${env:SGLANG_WRONG_KEY}', method: 'POST' },
      r3: { url: good.url, headers: 'Bearer ${env:SGLANG_API_KEY}', field: 'lvl' },
    };
    const env = { SGLANG_API_KEY: KEY, SGLANG_WRONG_KEY: WRONG };
    const tc = { grace_period: '0s', enforce_interval: '0s', markers: { enabled: false } };
    const { sf, sock, records } = await start(h, 'keys', { targets, tc }, env);

    // At start: r1 is set to 0 with the key; r2 is refused (401), r3's
    // level parameter is not SGLang's (400): both recorded once, with the
    // engine's status and body.
    const start0 = await waitRecords(records, (r) => r.length >= 3, 'one record per target at start');
    assert.deepEqual(good.levels, [0]);
    const byTarget = Object.fromEntries(start0.map((r) => [r.target, r]));
    assert.equal(byTarget.r1.event, 'enforce');
    assert.equal(byTarget.r1.previous, null);
    assert.equal(byTarget.r2.event, 'enforce_failed');
    assert.equal(byTarget.r2.status, 401);
    assert.equal(byTarget.r2.error, 'the engine answered 401: {"error":"Unauthorized"}');
    assert.equal(byTarget.r3.event, 'enforce_failed');
    assert.equal(byTarget.r3.status, 400);
    assert.match(byTarget.r3.error, /^the engine answered 400: \{"object":"error","message":".*'loc': \('query', 'level'\), 'msg': 'Field required'/);
    assert.equal(good.requests[0].authorization, `Bearer ${KEY}`, 'the header went to the engine');
    assert.equal(other.requests[0].method, 'POST');
    assert.match(other.requests[0].url, /^\/set_trace_level\?level=0$/);

    // A window on r1 works with the key.
    let r = await set(sock, 'r1');
    assert.equal(r.ok, true, r.message);
    assert.deepEqual(good.levels, [0, 3]);

    // r2: refused at once, with the status and body; nothing to reset, so
    // the next set is not told "still being reset".
    r = await set(sock, 'r2');
    assert.equal(r.ok, false);
    assert.equal(r.message, "engine 'r2' refused level 3: the engine answered 401: {\"error\":\"Unauthorized\"}; nothing was changed");
    r = await set(sock, 'r2');
    assert.equal(r.ok, false);
    assert.match(r.message, /refused level 3: the engine answered 401/);
    assert.doesNotMatch(r.message, /still being reset/);
    const refusedClose = records().filter((x) => x.target === 'r2' && x.event === 'close');
    assert.equal(refusedClose.length, 2);
    assert.equal(refusedClose[0].cause, 'set_refused');
    assert.equal(refusedClose[0].status, 401);
    assert.equal(refusedClose[0].error, 'the engine answered 401: {"error":"Unauthorized"}');
    assert.match(sf.stderr(), /target 'r2' refused level 3: the engine answered 401/);

    // The key is rotated on r1's engine while its window is open: the reset
    // is refused (401), recorded reset_failed at once, not retried forever.
    good.apiKey = 'sk-rotated';
    r = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(r.ok, false);
    assert.match(r.message, /^target 'r1' was not reset to level 0: the engine answered 401: \{"error":"Unauthorized"\}; recorded as reset_failed$/);
    let recs = records().filter((x) => x.target === 'r1');
    assert.deepEqual(recs.map((x) => x.event), ['enforce', 'open', 'close', 'reset_failed']);
    assert.equal(recs[3].why, 'refused');
    assert.equal(recs[3].status, 401);
    let st = await control(sock, { op: 'status' });
    assert.match(st.message, /^r1: level not known; reset to level 0 FAILED: the engine answered 401: \{"error":"Unauthorized"\} \(run 'spanfence trace-level reset --target r1' once it is mended\)$/m);
    assert.deepEqual(st.windows.map((w) => [w.target, w.state]), [['r1', 'failed']]);
    const m = await sf.metrics();
    assert.equal(m.must('spanfence_trace_control_target_level', { target: 'r1' }), -1);
    assert.equal(m.must('spanfence_trace_control_open_windows'), 0, 'a failed reset holds no window open');
    // It blocks nothing: a new window may be asked for (the engine says 401 again).
    r = await set(sock, 'r1');
    assert.equal(r.ok, false);
    assert.match(r.message, /refused level 3: the engine answered 401/);

    // Not retried across a restart: the next start does not "recover" the
    // window; enforcement tries the engine once.
    await sf.stop();
    let logs = sf.stderr();
    const before = records().length;
    sf.exit = null;
    await sf.start();
    await waitRecords(records, (x) => x.length > before, 'the records of the second start');
    await new Promise((res) => setTimeout(res, 300));
    recs = records().slice(before);
    assert.deepEqual(recs.filter((x) => x.event === 'close'), [], 'no window recovered after reset_failed');

    // The operator mends the key; `reset` tries the engine again and clears it.
    good.apiKey = KEY;
    const res = await run(['reset', '--socket', sock, '--target', 'r1']);
    assert.equal(res.code, 1, 'r1 has no window: reset says so');
    assert.match(res.stderr, /target 'r1' has no open window/);
    st = await control(sock, { op: 'status' });
    assert.match(st.message, /^r1: level not known; resting level not taken: the engine answered 401/m);

    // The secrets are nowhere.
    await sf.stop();
    logs += sf.stderr();
    const all = fs.readFileSync(path.join(h.dir, 'keys', 'trace-audit.jsonl'), 'utf8') + logs;
    assert.ok(!all.includes(KEY), 'the api key is in a log or audit record');
    assert.ok(!all.includes(WRONG), 'the wrong key is in a log or audit record');
  });
});

test('https engines: tls.ca_file, insecure_skip_verify, and a certificate that does not verify', async () => {
  await harness('trace_control_sglang', async (h) => {
    const dirTls = path.join(process.env.SF_SOURCE_DIR || path.join(__dirname, '..', '..'), 'tests', 'exporters', 'tls');
    const pem = path.join(dirTls, 'server.pem');
    const tls = { key: fs.readFileSync(path.join(dirTls, 'server.key')), cert: fs.readFileSync(pem) };
    const engine = new Engine({ apiKey: KEY, tls });
    await engine.start();
    h.onCleanup(() => engine.stop());
    assert.match(engine.url, /^https:/);
    const targets = {
      r1: { url: engine.url, headers: 'Bearer ${env:SGLANG_API_KEY}', tls: { ca_file: pem } },
      r2: { url: engine.url, headers: 'Bearer ${env:SGLANG_API_KEY}', tls: { insecure_skip_verify: true } },
      r3: { url: engine.url, headers: 'Bearer ${env:SGLANG_API_KEY}' },
    };
    const tc = { grace_period: '0s', enforce_interval: '0s', markers: { enabled: false } };
    const { sf, sock, records } = await start(h, 'tls', { targets, tc }, { SGLANG_API_KEY: KEY });
    const recs = await waitRecords(records, (r) => r.length >= 3, 'one record per target at start');
    const by = Object.fromEntries(recs.map((r) => [r.target, r]));
    assert.equal(by.r1.event, 'enforce');
    assert.equal(by.r2.event, 'enforce');
    assert.equal(by.r3.event, 'enforce_failed', 'the system CAs do not know a self-signed certificate');
    assert.equal(by.r3.status, undefined);
    assert.match(by.r3.error, /^TLS with the engine failed \(check tls\.ca_file\): /);
    let r = await set(sock, 'r1');
    assert.equal(r.ok, true, r.message);
    assert.equal(engine.level, 3);
    r = await set(sock, 'r3');
    assert.equal(r.ok, false);
    assert.match(r.message, /^engine 'r3' refused level 3: TLS with the engine failed/, 'permanent: nothing to reset');
    r = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(r.ok, true, r.message);
    assert.equal(engine.level, 0);
    await sf.stop();
  });
});

test('a failed reset is cleared by reset once the engine takes it; a reset never answered ends in reset_failed', async () => {
  await harness('trace_control_sglang', async (h) => {
    const e1 = new Engine({ apiKey: KEY });
    const e2 = new Engine();
    for (const e of [e1, e2]) { await e.start(); h.onCleanup(() => e.stop()); }
    const targets = {
      r1: { url: e1.url, headers: 'Bearer ${env:SGLANG_API_KEY}' },
      r2: { url: e2.url },
    };
    const tc = { grace_period: '0s', enforce_interval: '0s', reset_timeout: '1s', markers: { enabled: false } };
    const { sf, sock, records } = await start(h, 'failed', { targets, tc }, { SGLANG_API_KEY: KEY });
    await waitRecords(records, (r) => r.filter((x) => x.event === 'enforce').length === 2, 'both targets at rest');

    // r1: refused reset, then cleared by `reset` once the key is right again.
    assert.equal((await set(sock, 'r1')).ok, true);
    e1.apiKey = 'sk-rotated';
    let r = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(r.ok, false);
    e1.apiKey = KEY;
    r = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(r.ok, true, r.message);
    assert.equal(r.message, "target 'r1' is back at level 0");
    assert.equal(e1.level, 0);
    const r1 = records().filter((x) => x.target === 'r1').map((x) => x.event);
    assert.deepEqual(r1, ['enforce', 'open', 'close', 'reset_failed', 'reset']);
    assert.equal((await sf.metrics()).must('spanfence_trace_control_target_level', { target: 'r1' }), 0);

    // r2: the engine answers 503 to everything: the reset is retried with
    // backoff, then recorded reset_failed (why reset_timeout) after 1 s.
    assert.equal((await set(sock, 'r2', 200)).ok, true);
    e2.status = 503;
    const failed = await waitRecords(records, (x) => x.some((y) => y.target === 'r2' && y.event === 'reset_failed'),
      'r2 reset_failed after reset_timeout');
    const rf = failed.find((y) => y.target === 'r2' && y.event === 'reset_failed');
    assert.equal(rf.why, 'reset_timeout');
    assert.equal(rf.status, 503);
    assert.ok(rf.attempts >= 2, `retried before giving up (${rf.attempts} attempts)`);
    const st = await control(sock, { op: 'status' });
    assert.match(st.message, /^r2: level not known; reset to level 0 FAILED: the engine answered 503/m);
    // Bounded: no attempt after reset_failed.
    const n = e2.requests.length;
    await new Promise((res) => setTimeout(res, 500));
    assert.equal(e2.requests.length, n, 'a failed reset is not retried on its own');
    e2.status = 0;
    r = await control(sock, { op: 'reset', target: 'r2' });
    assert.equal(r.ok, true, r.message);
    assert.equal(e2.level, 0);
    await sf.stop();
  });
});

test('the resting level is enforced at start and after the engine restarts at level 3', async () => {
  await harness('trace_control_sglang', async (h) => {
    const engine = new Engine();        // SGLang's default: level 3
    await engine.start();
    h.onCleanup(() => engine.stop());
    assert.equal(engine.level, 3);
    const tc = { enforce_interval: '200ms', markers: { enabled: false } };
    const { sf, records } = await start(h, 'enforce', { targets: { r1: { url: engine.url } }, tc });

    await engine.waitFor(() => engine.level === 0, 'the resting level at start');
    let recs = await waitRecords(records, (r) => r.length >= 1, 'the enforce record');
    assert.equal(recs[0].event, 'enforce');
    assert.equal(recs[0].level, 0);
    assert.equal(recs[0].previous, null);
    assert.equal(recs[0].note, 'at start');
    let m = await sf.waitMetrics((x) => x.get('spanfence_trace_control_target_level', { target: 'r1' }) === 0, 'level 0');
    assert.ok(m.must('spanfence_trace_control_target_level_set_seconds', { target: 'r1' }) > 1.6e9);

    // Rounds go on; the audit log gets nothing more while nothing changes.
    await engine.waitFor(() => engine.levels.length >= 4, 'three more enforcement rounds');
    assert.deepEqual(records().map((x) => x.event), ['enforce'], 'recorded once per change, not per round');

    // The engine restarts at its default 3. While it is down the level is
    // not known (recorded once); once back it is set to 0 again (recorded).
    await engine.stop();
    await sf.waitMetrics((x) => x.get('spanfence_trace_control_target_level', { target: 'r1' }) === -1, 'level not known while the engine is down');
    recs = await waitRecords(records, (r) => r.length >= 2, 'enforce_failed');
    assert.equal(recs[1].event, 'enforce_failed');
    assert.match(recs[1].error, /^the engine did not answer: /);
    await engine.start({ level: 3 });
    await engine.waitFor(() => engine.level === 0, 'the restarted engine set back to 0');
    recs = await waitRecords(records, (r) => r.length >= 3, 'the second enforce record');
    assert.equal(recs[2].event, 'enforce');
    assert.equal(recs[2].previous, null);
    assert.match(recs[2].note, /may have restarted/);
    const took = engine.levels.length;
    await engine.waitFor(() => engine.levels.length >= took + 3, 'three more rounds');
    assert.equal(records().length, 3, 'still once per change');
    m = await sf.metrics();
    assert.equal(m.must('spanfence_trace_control_target_level', { target: 'r1' }), 0);
    await sf.stop();
  });
});

// Spans through the real receiver: n spans of a request with a resource the
// allowlist trims.
async function send(client, n, prefix) {
  const { bytes } = peers.serializedSpans(n, prefix);
  const res = await client.call(bytes);
  assert.equal(res.code, peers.status.OK, `send ${prefix}`);
}

test('markers at the sink; auto-revert on loss; the grace period', async () => {
  await harness('trace_control_sglang', async (h) => {
    const engine = new Engine({ level: 0 });
    await engine.start();
    h.onCleanup(() => engine.stop());
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const tc = { grace_period: '5s', enforce_interval: '0s',
      auto_revert: { max_lost_spans: 5, max_loss_ratio: 1, check_interval: '100ms' } };
    const { sf, sock, grpcPort, records } = await start(h, 'markers', { targets: { r1: { url: engine.url } }, gateway: gw, tc });
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());
    await waitRecords(records, (r) => r.length === 1, 'enforce at start');

    // Window 1 loses spans: the gateway refuses one request for good (400),
    // 10 spans > max_lost_spans 5: the window ends (cause loss) and the
    // engine is reset without waiting for its planned end.
    let r = await set(sock, 'r1', 600000, 'INC-8 lossy');
    assert.equal(r.ok, true, r.message);
    await send(client, 4, 'ok1');
    await gw.waitForSpans(4, 30000);
    gw.failFirst(1, 400);
    await send(client, 10, 'lost');
    await engine.waitFor(() => engine.level === 0, 'the engine reset on loss');
    let recs = await waitRecords(records, (x) => x.some((y) => y.event === 'close'), 'the closing record after the grace period');
    assert.deepEqual(recs.map((x) => x.event), ['enforce', 'open', 'reset', 'close'], 'reset at the end, close after the grace period');
    let close = recs[3];
    assert.equal(close.cause, 'loss');
    assert.equal(close.revert_reason, '10 spans lost (more than max_lost_spans 5)');
    assert.equal(close.grace_ms, 5000);
    assert.equal(close.accepted, 14);
    assert.equal(close.exported, 4);
    assert.equal(close.lost, 10);
    assert.equal(close.send_failed.permanent_error, 10);
    assert.equal(close.complete, false);
    assert.equal(close.marker, 'sent');
    // logged at warn: the operator's capture was cut short
    assert.match(sf.stderr(), /warn +trace_control: window '[^']+' on target 'r1' reverted early \(auto_revert\): 10 spans lost/);

    // Its marker span reaches the gateway through the exporter, after the
    // allowlist (which would have removed its attributes).
    await gw.waitFor(() => gw.spans.some((s) => s.resource['service.name'] === 'spanfence'), 'marker 1');
    let markers = gw.spans.filter((s) => s.resource['service.name'] === 'spanfence');
    assert.equal(markers.length, 1);
    let mk = markers[0];
    assert.equal(mk.name, 'trace_control window r1');
    assert.equal(mk.scope.name, 'spanfence.trace_control');
    assert.deepEqual(mk.attributes, {
      'spanfence.window.id': close.window,
      'spanfence.window.target': 'r1',
      'spanfence.window.level': 3,
      'spanfence.window.reason': 'INC-8 lossy',
      'spanfence.window.uid': process.getuid(),
      'spanfence.window.cause': 'loss',
      'spanfence.window.note': '10 spans lost (more than max_lost_spans 5)',
      'spanfence.window.accepted': 14,
      'spanfence.window.exported': 4,
      'spanfence.window.refused': 0,
      'spanfence.window.failed': 10,
      'spanfence.window.lost': 10,
      'spanfence.window.lost_collector': 10,
      'spanfence.window.complete': false,
      'spanfence.window.capture': 'incomplete',
      'spanfence.window.grace_ms': 5000,
    });
    assert.equal(mk.status.code, 2, 'an incomplete capture is an error span');
    const engineSpan = gw.spans.find((s) => s.name === 'ok1 0');
    assert.deepEqual(Object.keys(engineSpan.attributes), ['gen_ai.request.id'], 'engine spans went through the allowlist');

    // Window 1's marker is counted sent before window 2 opens.
    await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp' }) === 5, 'marker 1 sent');

    // Window 2 is complete, and the grace period counts the spans of
    // requests still in flight when it ended: 3 spans sent after the engine
    // was reset are in its counts.
    r = await set(sock, 'r1', 1500, 'INC-9 clean');
    assert.equal(r.ok, true, r.message);
    const open2 = records().filter((x) => x.event === 'open')[1];
    await send(client, 7, 'w2');
    await engine.waitFor(() => engine.levels.filter((l) => l === 0).length === 3, 'window 2 expired and reset');
    await send(client, 3, 'grace');
    recs = await waitRecords(records, (x) => x.filter((y) => y.event === 'close').length === 2, 'the second closing record');
    close = recs[recs.length - 1];
    assert.deepEqual(recs.slice(-3).map((x) => x.event), ['open', 'reset', 'close']);
    assert.equal(close.cause, 'expired');
    assert.equal(close.accepted, 10, 'the 7 spans in the window and the 3 in its grace period');
    assert.equal(close.exported, 10);
    assert.equal(close.lost, 0);
    assert.equal(close.complete, true);
    await gw.waitFor(() => gw.spans.filter((s) => s.resource['service.name'] === 'spanfence').length === 2, 'marker 2');
    markers = gw.spans.filter((s) => s.resource['service.name'] === 'spanfence');
    mk = markers[1];
    assert.equal(mk.attributes['spanfence.window.id'], open2.window);
    assert.equal(mk.attributes['spanfence.window.cause'], 'expired');
    assert.equal(mk.attributes['spanfence.window.accepted'], 10);
    assert.equal(mk.attributes['spanfence.window.exported'], 10);
    assert.equal(mk.attributes['spanfence.window.failed'], 0);
    assert.equal(mk.attributes['spanfence.window.complete'], true);
    assert.equal(mk.attributes['spanfence.window.capture'], 'complete at the collector', 'no engine_log: the engine\'s side unseen');
    assert.equal(mk.status.code, 1);
    assert.notEqual(markers[0].traceId, markers[1].traceId);

    // The collector's accounts balance with the markers in them.
    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp' }) === 16, 'marker 2 sent');
    assert.equal(m.must('spanfence_extension_injected_spans', { extension: 'trace_control' }), 2);
    const accepted = m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp' });
    assert.equal(accepted, 24);
    const EXP = { exporter: 'otlphttp' };
    assert.equal(m.must('otelcol_exporter_sent_spans', EXP) + m.must('otelcol_exporter_send_failed_spans', { ...EXP, reason: 'permanent_error' }),
      accepted + 2);
    assert.equal(gw.spans.length, 24 - 10 + 2);
    await sf.stop();
  });
});

test('a window a crash left open: reset at the next start, its marker sent once the exporters run', async () => {
  await harness('trace_control_sglang', async (h) => {
    const engine = new Engine({ level: 0 });
    await engine.start();
    h.onCleanup(() => engine.stop());
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const tc = { grace_period: '0s', enforce_interval: '0s' };
    const { sf, sock, records } = await start(h, 'crash', { targets: { r1: { url: engine.url } }, gateway: gw, tc });
    await waitRecords(records, (r) => r.length === 1, 'enforce at start');
    assert.equal((await set(sock, 'r1', 600000, 'INC-10 crash')).ok, true);
    assert.equal(engine.level, 3);
    sf.kill();
    await sf.exited;
    sf.exit = null;
    await sf.start();
    await engine.waitFor(() => engine.level === 0, 'the crashed window reset at start');
    const recs = await waitRecords(records, (x) => x.some((y) => y.event === 'reset'), 'the reset record');
    assert.deepEqual(recs.map((x) => x.event), ['enforce', 'open', 'close', 'reset']);
    assert.equal(recs[2].cause, 'recovered');
    assert.equal(recs[2].scope, 'none');
    assert.equal(recs[2].complete, false);
    assert.equal(recs[2].marker, 'pending', 'written before the exporters started');
    await gw.waitFor(() => gw.spans.some((x) => x.resource['service.name'] === 'spanfence'), 'the recovered window\'s marker');
    const mk = gw.spans.filter((x) => x.resource['service.name'] === 'spanfence');
    assert.equal(mk.length, 1);
    assert.equal(mk[0].attributes['spanfence.window.id'], recs[1].window);
    assert.equal(mk[0].attributes['spanfence.window.cause'], 'recovered');
    assert.equal(mk[0].attributes['spanfence.window.reason'], 'INC-10 crash');
    assert.equal(mk[0].attributes['spanfence.window.level'], 3);
    assert.equal(mk[0].attributes['spanfence.window.complete'], false);
    assert.equal(mk[0].attributes['spanfence.window.accepted'], undefined, 'no counts: they died with the process');
    assert.equal(mk[0].status.code, 2);
    await sf.waitLog(/the marker span of window '[^']+' was sent/, 'the log says the pending marker went');
    await sf.stop();
  });
});

test('--direct writes its outcome as its own record', async () => {
  await harness('trace_control_sglang', async (h) => {
    const engine = new Engine({ apiKey: KEY });
    await engine.start();
    h.onCleanup(() => engine.stop());
    const dir = path.join(h.dir, 'direct');
    fs.mkdirSync(dir, { recursive: true });
    const cfg = path.join(dir, 'direct.yaml');
    fs.writeFileSync(cfg, config({ dir, targets: { r1: { url: engine.url, headers: 'Bearer ${env:SGLANG_API_KEY}' } } })
      .replace(/\$\{env:SF_GRPC_PORT\}/, '4317').replace(/\$\{env:SF_METRICS_PORT\}/, '8888'));
    const audit = path.join(dir, 'trace-audit.jsonl');
    const records = () => fs.readFileSync(audit, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const setArgs = ['set', '--direct', '--config', cfg, '--target', 'r1', '--level', '3', '--for', '5m', '--reason', 'no collector'];

    let res = await run(setArgs, { SGLANG_API_KEY: KEY });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(engine.level, 3);
    let recs = records();
    assert.deepEqual(recs.map((x) => [x.event, x.outcome]), [['direct_set', undefined], ['direct_outcome', 'applied']]);
    assert.equal(recs[1].window, recs[0].window);
    assert.equal(recs[1].status, 200);

    res = await run(setArgs, { SGLANG_API_KEY: WRONG });
    assert.equal(res.code, 1);
    assert.equal(res.stderr, 'spanfence: engine \'r1\' refused level 3: the engine answered 401: {"error":"Unauthorized"}\n');
    recs = records();
    assert.deepEqual(recs.slice(2).map((x) => [x.event, x.outcome]), [['direct_set', undefined], ['direct_outcome', 'refused']]);
    assert.equal(recs[3].status, 401);
    assert.equal(recs[3].error, 'the engine answered 401: {"error":"Unauthorized"}');

    res = await run(['reset', '--direct', '--config', cfg, '--target', 'r1'], { SGLANG_API_KEY: KEY });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(engine.level, 0);
    assert.deepEqual(records().slice(4).map((x) => [x.event, x.outcome]), [['direct_reset', undefined], ['direct_outcome', 'applied']]);

    await engine.stop();
    res = await run(setArgs, { SGLANG_API_KEY: KEY });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /^spanfence: engine 'r1' did not take level 3: the engine did not answer: /);
    recs = records();
    assert.equal(recs[7].event, 'direct_outcome');
    assert.equal(recs[7].outcome, 'failed');
    assert.equal(recs[7].status, undefined);
    assert.match(recs[7].error, /^the engine did not answer: /);
    const all = fs.readFileSync(audit, 'utf8');
    assert.ok(!all.includes(KEY) && !all.includes(WRONG), 'a key is in the audit log');
  });
});
