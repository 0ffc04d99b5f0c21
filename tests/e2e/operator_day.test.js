// tests/e2e/operator_day.test.js: the trip-wires of an operator's day with
// trace_control (issue 24), one test each, against the real binary:
//  - 11: a window keeps its time box whatever control-socket clients do: a
//    client trickling a byte every 1.5 s and 10 silent ones neither delay
//    `status` nor the window's end; the engine is reset and the window
//    closed within a second of its planned end (read from the audit
//    records' own times, not from a sleep).
//  - 12: the audit log's file system fills in the middle of a record: no
//    part of it stays in the file, the record is written whole once there is
//    room, and every line of the log is one JSON object. The file system is
//    a 64 KiB tmpfs mounted in the collector's own mount namespace (unshare
//    -m), reached from the test through /proc/<pid>/root.
//  - 7: a clean window whose spans are still in the batch processor when
//    its grace period (1 s) ends (batch timeout 3 s) is recorded complete:
//    its close waits for them, and the record carries `queued` (0); the
//    config's grace_period is warned about at start.
//  - 8: someone raises a resting engine's level directly (SGLang's route is
//    unauthenticated) and its spans arrive: an out_of_band audit record, a
//    warning, a metric, and the resting level set again at once.
//  - 9: SIGTERM with accepted spans still queued (the gateway refuses):
//    they are dropped at shutdown and the exit status is 1, as --help and
//    the man page say for lost work.
//  - 10: a port in use is said in one line, without gRPC core's status blob.
//  - 5: `trace-level status --config FILE` needs only the socket: it works
//    in a shell without the gateway's token the config names.
//  - 6: `trace-level status` gives an open window's own live counts (and
//    its engine's, by match), which move while spans arrive, and after the
//    window what its close said.
//  - 3 (sd_notify): under a stand-in NOTIFY_SOCKET (a python3 unix
//    datagram socket): READY=1 only once the gRPC port accepts,
//    RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a SIGHUP, a
//    refused reload reported in STATUS, STATUS lines with the last minute's
//    counts, WATCHDOG=1 pings, STOPPING=1 at SIGTERM.
//  - 4: the runbook's SGLang launch and configs/compose.yaml as current
//    SGLang takes them (SGLANG_TRACE_LEVEL, --otlp-traces-endpoint,
//    OTEL_RESOURCE_ATTRIBUTES with the service.instance.id a match names).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const { harness, freePort, sleep } = require('./lib/spanfence');
const { spawnSync } = require('node:child_process');
const deps = require('./lib/deps');
const { control } = require('./lib/engine');
const { tcSetup } = require('./lib/tc_fixture');
const peers = require('./lib/peers');
const { Gateway } = require('./lib/gateway');
const { makeExporter } = require('./lib/senders');
const { notifyOn } = require('./lib/notify');

const setup = tcSetup;

const set = (sock, forMs = 600000, timeoutMs = 20000) =>
  control(sock, { op: 'set', target: 'r1', level: 3, for_ms: forMs, reason: 'INC-24 e2e' }, timeoutMs);

// Clients that misbehave on the control socket until stop(): `silent` ones
// connect and say nothing, a trickling one sends a byte every 1.5 s; each
// connects again when the collector hangs up. `closedByPeer` counts the
// hang-ups.
function abusers(sock, { silent = 10, trickle = 1 } = {}) {
  const st = { stopped: false, closedByPeer: 0, socks: new Set() };
  const one = (trickling) => {
    if (st.stopped) return;
    const s = net.connect({ path: sock });
    st.socks.add(s);
    let timer = null;
    s.on('connect', () => {
      if (!trickling) return;
      const text = '{"op":"status"'.split('');
      timer = setInterval(() => { if (text.length) s.write(text.shift()); }, 1500);
    });
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(timer);
      st.socks.delete(s);
      if (st.stopped) return;
      st.closedByPeer++;
      setTimeout(() => one(trickling), 10);
    });
  };
  for (let i = 0; i < silent; i++) one(false);
  for (let i = 0; i < trickle; i++) one(true);
  st.stop = () => {
    st.stopped = true;
    for (const s of st.socks) s.destroy();
  };
  return st;
}

test('11: a trickling client and 10 silent ones hold neither status nor a window past its end', async () => {
  await harness('operator_day', async (h) => {
    const { engine, sock, waitRecords } = await setup(h, 'timebox');
    const bad = abusers(sock);
    h.onCleanup(() => bad.stop());
    await sleep(200);   // let them connect first: they are ahead of us
    const st = await control(sock, { op: 'status' }, 60000);
    assert.equal(st.ok, true);
    // Served while every misbehaving client was still connected: the
    // collector had not yet hung up on any of them to get to us.
    assert.equal(bad.closedByPeer, 0, 'status waited for the misbehaving clients to be cut off');

    const forMs = 3000;
    const r = await set(sock, forMs, 60000);
    assert.equal(r.ok, true, r.message);
    const recs = await waitRecords((rs) => rs.some((x) => x.event === 'close') && rs.some((x) => x.event === 'reset'), 'the window closed and its engine reset');
    const open = recs.find((x) => x.event === 'open');
    const reset = recs.find((x) => x.event === 'reset');
    const close = recs.find((x) => x.event === 'close');
    const planned = Date.parse(open.planned_end);
    assert.equal(close.cause, 'expired');
    assert.ok(reset, 'the engine was reset');
    const resetLate = Date.parse(reset.time) - planned;
    const endLate = Date.parse(close.end) - planned;
    assert.ok(endLate >= 0 && endLate < 1000, `the window ended ${endLate} ms after its planned end`);
    assert.ok(resetLate >= 0 && resetLate < 1000, `the engine was reset ${resetLate} ms after the planned end`);
    assert.deepEqual(engine.levels, [3, 0]);
    assert.ok(bad.closedByPeer > 0, 'the collector cut the misbehaving clients off at their deadline');
    bad.stop();
  });
});

test('12: a record cut short by a full file system leaves no torn line; it is written whole later', async () => {
  await harness('operator_day', async (h) => {
    const { sock, audit, lines, waitRecords } = await setup(h, 'torn', {
      wrap: (dir) => ['unshare', '-m', 'sh', '-c',
        'mount -t tmpfs -o size=64k tmpfs "$0" && exec "$@"', path.join(dir, 'audit')],
    });
    assert.equal((await set(sock)).ok, true);
    await waitRecords((rs) => rs.some((x) => x.event === 'open'), 'the open record');
    // Pad the log with one whole line so its last page has 60 bytes free,
    // then fill every other page: the next record (the reset, ~120 bytes)
    // gets a short write.
    const page = 4096;
    let need = page - 60 - (fs.statSync(audit).size % page);
    if (need < 32) need += page;
    fs.appendFileSync(audit, `{"event":"pad","x":"${'x'.repeat(need - 23)}"}\n`);
    assert.equal(fs.statSync(audit).size % page, page - 60);
    const filler = path.join(path.dirname(audit), 'filler');
    const fd = fs.openSync(filler, 'w');
    try {
      for (;;) fs.writeSync(fd, Buffer.alloc(page));
    } catch (e) {
      assert.equal(e.code, 'ENOSPC');
    }
    fs.closeSync(fd);
    const before = lines().length;
    const r = await control(sock, { op: 'reset', target: 'r1' });
    assert.equal(r.ok, false, 'reset reported success with its record unwritten');
    assert.match(r.message, /cannot be written/);
    for (const l of lines()) JSON.parse(l);   // no torn line meanwhile
    assert.equal(lines().length, before);
    fs.unlinkSync(filler);
    const recs = await waitRecords((rs) => rs.some((x) => x.event === 'close') && rs.some((x) => x.event === 'reset'), 'the records written once there is room');
    const all = lines();
    for (const l of all) assert.doesNotThrow(() => JSON.parse(l), `a torn line in the audit log: ${l}`);
    assert.equal(recs.filter((x) => x.event === 'reset').length, 1);
    assert.equal(recs.filter((x) => x.event === 'close').length, 1);
  });
});

test('7: a window closed while its spans are still batched waits for them: complete, queued 0', async () => {
  await harness('operator_day', async (h) => {
    // the batch processor merges in the exporter's sending queue
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const { sf, sock, waitRecords } = await setup(h, 'complete', {
      grace: '1s',
      processors: { batch: { timeout: '3s' } },
      exporters: { otlphttp: { endpoint: gw.url, sending_queue: { queue_size: 64 } } },
    });
    await sf.waitLog(/grace_period: warning: 1000ms is shorter than the timeout \(3000ms\) of processor 'batch'/,
      'the grace_period warning');
    assert.equal((await set(sock, 1000)).ok, true);
    await peers.sendSdkSpans({ port: sf.grpcPort, n: 20 });
    const recs = await waitRecords((rs) => rs.some((x) => x.event === 'close'), 'the close record');
    const close = recs.find((x) => x.event === 'close');
    assert.equal(close.accepted, 20);
    assert.equal(close.exported, 20);
    assert.equal(close.lost, 0);
    assert.equal(close.queued, 0);
    assert.equal(close.complete, true, JSON.stringify(close));
    assert.equal(gw.spans.length, 20);
  });
});

test('8: spans from a resting engine raised out of band: recorded, warned, counted, set back at once', async () => {
  await harness('operator_day', async (h) => {
    const { engine, sf, waitRecords, lines } = await setup(h, 'oob', { match: true });
    // the collector has recorded the resting level (the fixture waited for
    // the engine's request only; spans before that are the engine's default)
    await sf.waitLog(/target 'r1' set to its resting level 0/, 'the resting level recorded');
    const r = await fetch(`${engine.url}?level=3`);   // not through spanfence
    assert.equal(r.status, 200);
    assert.deepEqual(engine.levels, [3]);
    // the engine at 3 keeps emitting: 5 spans a turn until the record is there
    let sent = 0;
    const oobSeen = () => lines().some((l) => JSON.parse(l).event === 'out_of_band');
    for (let i = 0; i < 100 && !oobSeen(); i++) {
      await peers.sendSpansThrough(makeExporter('grpc', { grpcPort: sf.grpcPort, compression: 'none' }),
        { n: 5, resource: { 'service.instance.id': 'r1' } });
      sent += 5;
      await sleep(200);
    }
    const recs = await waitRecords((rs) => rs.some((x) => x.event === 'out_of_band'), 'the out_of_band record');
    const oob = recs.find((x) => x.event === 'out_of_band');
    assert.equal(oob.target, 'r1');
    assert.ok(oob.spans >= 1 && oob.spans <= sent, JSON.stringify(oob));
    await engine.waitFor(() => engine.levels.length >= 2, 'the resting level set again');
    assert.deepEqual(engine.levels.slice(0, 2), [3, 0]);
    await sf.waitLog(/warn +trace_control: \d+ spans from target 'r1' while no window is open/, 'the warning');
    const m = await sf.metrics();
    assert.ok(m.must('spanfence_trace_control_out_of_band_spans') >= 1);
  });
});

test('9: SIGTERM with accepted spans still queued exits 1 (work lost), as --help says', async () => {
  await harness('operator_day', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    gw.setStatus(503);
    const { sf } = await setup(h, 'lost', {
      exporters: {
        otlphttp: { endpoint: gw.url, timeout: '1s', sending_queue: { queue_size: 64 },
          retry_on_failure: { initial_interval: '100ms', max_interval: '200ms', max_elapsed_time: '10m' } },
      },
    });
    await peers.sendSdkSpans({ port: sf.grpcPort, n: 20 });
    await sf.waitMetrics((m) => m.get('otelcol_receiver_accepted_spans') === 20, '20 spans accepted');
    const res = await sf.signalAndWait('SIGTERM', 30000);
    assert.ok(res, 'exited');
    assert.match(sf.stderr(), /dropped 20 spans at shutdown/);
    assert.match(sf.stderr(), /stopped, but 20 accepted spans could not be exported/);
    assert.deepEqual(res, { code: 1, signal: null });
  });
});

test('10: a port in use is reported in one line', async () => {
  await harness('operator_day', async (h) => {
    const busy = net.createServer();
    await new Promise((r) => busy.listen(0, '127.0.0.1', r));
    h.onCleanup(() => new Promise((r) => busy.close(r)));
    const port = busy.address().port;
    const cfgPath = path.join(h.dir, 'busy.yaml');
    fs.writeFileSync(cfgPath, `receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:${port}\n` +
      `exporters:\n  debug: {}\nservice:\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [debug]\n`);
    const r = spawnSync(deps.spanfenceBin(), ['--config', cfgPath], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 1, r.stderr);
    const errors = r.stderr.split('\n').filter((l) => / error /.test(l));
    assert.equal(errors[0].replace(/^\S+ error +/, ''),
      `receiver 'otlp': cannot listen for OTLP/gRPC on '127.0.0.1:${port}': address already in use`);
    for (const l of r.stderr.split('\n')) {
      assert.doesNotMatch(l, /UNKNOWN:|created_time|chttp2/, 'gRPC core\'s status blob');
      assert.ok(l.length < 200, `a ${l.length}-character line: ${l}`);
    }
  });
});

test('4: the operators\' guide and compose launch SGLang as it takes its options today', () => {
  const src = process.env.SF_SOURCE_DIR || path.join(__dirname, '..', '..');
  const readme = fs.readFileSync(path.join(src, 'pipeline', 'extensions', 'trace_control', 'README.md'), 'utf8');
  const compose = fs.readFileSync(path.join(src, 'configs', 'compose.yaml'), 'utf8');
  assert.doesNotMatch(readme, /--oltp-traces-endpoint|--trace-level \d/, 'a flag SGLang does not have');
  assert.match(readme, /SGLANG_TRACE_LEVEL=0 OTEL_RESOURCE_ATTRIBUTES=service\.instance\.id=r1 \\\n +python3 -m sglang\.launch_server .*\\\n +--enable-trace --otlp-traces-endpoint 127\.0\.0\.1:4317/);
  const engine = compose.slice(compose.indexOf('\n  engine:'));
  assert.match(engine, /\n      SGLANG_TRACE_LEVEL: "0"\n/);
  assert.match(engine, /\n      OTEL_RESOURCE_ATTRIBUTES: service\.instance\.id=/);
  assert.match(engine, /"--enable-trace",\s+"--otlp-traces-endpoint", "127\.0\.0\.1:4317"/);
  // launch_server cannot start without a model (issue 37): from the
  // environment, compose refusing to start without it; metrics on
  assert.match(engine, /"sglang\.launch_server",\s+"--model-path", "\$\{SGLANG_MODEL_PATH:\?[^}]+\}"/);
  assert.match(engine, /"--enable-metrics"/);
});

test('3: sd_notify: READY after the ports accept, RELOADING/READY around SIGHUP, a refused reload, STATUS, WATCHDOG, STOPPING', async () => {
  await harness('operator_day', async (h) => {
    const { canConnect } = require('./lib/spanfence');
    const n = await notifyOn(h, 'notify.sock');
    let readyProbe = null;
    const grpcPort = await freePort();
    const ready = n.waitFor((m) => m.split('\n').includes('READY=1'), 'READY=1').then(async (m) => {
      readyProbe = await canConnect(grpcPort);
      return m;
    });
    const { sf } = await setup(h, 'notify', { grpcPort, env: { NOTIFY_SOCKET: n.path, WATCHDOG_USEC: '2000000' } });
    await ready;
    assert.equal(readyProbe, true, 'READY=1 sent before the gRPC port accepted');
    assert.ok(n.msgs.findIndex((m) => m.includes('READY=1')) === n.msgs.findIndex((m) => m.includes('=')),
      'READY=1 is the first message');
    await n.waitFor((m) => m.includes('WATCHDOG=1'), 'a watchdog ping');
    await n.waitFor((m) => /^STATUS=last minute: \d+ spans accepted, \d+ exported, \d+ lost/.test(m), 'a STATUS line');

    let before = n.msgs.length;
    sf.proc.kill('SIGHUP');
    const rel = await n.waitFor((m) => m.startsWith('RELOADING=1'), 'RELOADING=1');
    assert.match(rel, /\nMONOTONIC_USEC=\d+/);
    await n.waitFor((m) => m.startsWith('READY=1\nSTATUS=reloaded'), 'READY=1 after the reload');
    const order = n.msgs.slice(before).filter((m) => !m.startsWith('WATCHDOG') && !m.startsWith('STATUS=last'));
    assert.ok(order[0].startsWith('RELOADING=1') && order[1].startsWith('READY=1'), JSON.stringify(order));

    fs.writeFileSync(sf.configPath, 'receivers: [not valid\n');
    before = n.msgs.length;
    sf.proc.kill('SIGHUP');
    await n.waitFor((m) => m.startsWith('READY=1\nSTATUS=reload refused'), 'the refused reload reported');

    const res = await sf.signalAndWait('SIGTERM', 30000);
    assert.deepEqual(res, { code: 0, signal: null });
    assert.ok(n.msgs.some((m) => m.startsWith('STOPPING=1')), 'STOPPING=1');
  });
});

test('3: a socket_group the collector\'s user is not in is refused at validate, naming it; the audit record names the peer', async () => {
  await harness('operator_day', async (h) => {
    const { records, sock } = await setup(h, 'peer');
    assert.equal((await set(sock, 1000)).ok, true);
    const open = records().find((x) => x.event === 'open');
    assert.equal(open.uid, process.getuid());
    assert.equal(open.user, require('node:os').userInfo().username);

    // validate as nobody (the tests run as root, who may give a socket to any group)
    const dir = fs.mkdtempSync('/tmp/sf-sg-');
    h.onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
    fs.chmodSync(dir, 0o755);
    const cfg = path.join(dir, 'sg.yaml');
    fs.writeFileSync(cfg, `receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:4317\n` +
      `exporters:\n  debug: {}\nextensions:\n  trace_control:\n    socket: ${dir}/tc.sock\n    socket_group: root\n` +
      `    audit_log: ${dir}/a.jsonl\n    levels: [0, 3]\n    targets:\n      r1:\n        endpoint: http://127.0.0.1:1/set_trace_level\n` +
      `service:\n  extensions: [trace_control]\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [debug]\n`, { mode: 0o644 });
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', deps.spanfenceBin(), 'validate', '--config', cfg],
      { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 1, r.stderr + r.stdout);
    assert.match(r.stderr, /sg\.yaml:11:19: extensions\.trace_control\.socket_group: the collector's user 'nobody' \(uid 65534\) is not in group 'root'/);
  });
});

test('5: trace-level status --config needs only the socket, not the gateway\'s env vars', async () => {
  await harness('operator_day', async (h) => {
    const { sf, sock } = await setup(h, 'noenv', {
      env: { GATEWAY_TOKEN: 's3cret' },
      exporters: {
        otlphttp: { endpoint: 'http://127.0.0.1:9', headers: { Authorization: 'Bearer ${env:GATEWAY_TOKEN}' } },
      },
    });
    assert.equal((await set(sock)).ok, true);
    const env = { ...process.env };
    delete env.GATEWAY_TOKEN;
    delete env.SF_GRPC_PORT;
    delete env.SF_METRICS_PORT;
    const r = spawnSync(deps.spanfenceBin(), ['trace-level', 'status', '--config', sf.configPath],
      { encoding: 'utf8', env, timeout: 30000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /r1: level 3 .*window at level 3/);
    assert.equal(r.stderr, '');
  });
});

test('6: status shows an open window\'s own counts moving while spans arrive, then how it closed', async () => {
  await harness('operator_day', async (h) => {
    const { sf, sock } = await setup(h, 'counts', { match: true });
    assert.equal((await set(sock)).ok, true);
    const exporter = () => makeExporter('grpc', { grpcPort: sf.grpcPort, compression: 'none' });
    const win = async (pred, what) => {
      const deadline = Date.now() + 30000;
      for (;;) {
        const st = await control(sock, { op: 'status' });
        const w = st.windows.find((x) => x.target === 'r1');
        if (w && pred(w)) return { st, w };
        if (Date.now() > deadline) throw new Error(`status never showed ${what}: ${JSON.stringify(st)}`);
        await sleep(100);
      }
    };
    await peers.sendSpansThrough(exporter(), { n: 5, resource: { 'service.instance.id': 'r1' } });
    let { st, w } = await win((x) => x.accepted_from_target === 5, '5 spans from r1');
    assert.equal(w.accepted, 5);
    assert.match(st.message, /since it opened: 5 spans accepted, \d+ exported, 0 lost, 5 from the target \(0 refused\)/);
    await peers.sendSpansThrough(exporter(), { n: 7, resource: { 'service.instance.id': 'r1' } });
    await peers.sendSpansThrough(exporter(), { n: 3, resource: { 'service.instance.id': 'r9' } });
    ({ w } = await win((x) => x.accepted === 15, '15 spans accepted'));
    assert.equal(w.accepted_from_target, 12);
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    // The reset sets level 0 at once; the window closes once its spans have
    // left (its grace), which status shows until then as 'closes in ...'.
    let after;
    for (const deadline = Date.now() + 30000; ;) {
      after = await control(sock, { op: 'status' });
      if (!/closes in/.test(after.message) || Date.now() > deadline) break;
      await sleep(100);
    }
    assert.match(after.message, /r1: level 0 .*last window 'r1-\d+' closed \(reset\): 15 spans accepted/);
  });
});
