// tests/e2e/operator_status.test.js: the runbook's one screen and the
// operator's reload (issue 24), against the real binary:
//  - `spanfence status` and `--json` against a running collector with an
//    open trace-level window: the window's own counts (and its engine's,
//    by match) move while spans arrive, time left counts down, from the
//    config file alone in a shell without the gateway's token; after the
//    window, its close; the per-window series on /metrics, bounded to the
//    open window and the last closed one per target.
//  - the STATUS= line for systemctl status lists the open window.
//  - the watchdog's pings go on while the gateway is down and the exporter
//    retries (a stuck send is the unit test's: test_sender).
//  - `spanfence reload --pid`: 0 when the new config runs (and the
//    allowlist's digest in `status` follows the new rules), 1 when it is
//    refused or validates but cannot start (a port in use), the outcome
//    also in `status`.
//  - `spanfence print-config`: defaults filled in, ${env:...} expanded,
//    every secret redacted (header values, a URL's password, pseudonym
//    key); its output is itself a config `validate` takes.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { harness, sleep } = require('./lib/spanfence');
const deps = require('./lib/deps');
const { control } = require('./lib/engine');
const { tcSetup } = require('./lib/tc_fixture');
const peers = require('./lib/peers');
const { Gateway } = require('./lib/gateway');
const { makeExporter } = require('./lib/senders');
const { notifyOn } = require('./lib/notify');

const TOKEN = 's3cret-gateway-token';

// `spanfence <args>` in a shell without the gateway's token (nor the
// gRPC port the collector's env had); the metrics port stays: the
// fixture's config takes it from the environment as well.
function cli(sf, args, { keepMetrics = true } = {}) {
  const env = { ...process.env };
  delete env.GATEWAY_TOKEN;
  delete env.SF_GRPC_PORT;
  if (keepMetrics) env.SF_METRICS_PORT = String(sf.metricsPort);
  return spawnSync(deps.spanfenceBin(), args, { encoding: 'utf8', env, timeout: 60000 });
}

function statusJson(sf) {
  const r = cli(sf, ['status', '--json', '--config', sf.configPath]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.ok(!r.stdout.includes(TOKEN), 'the token in status');
  return JSON.parse(r.stdout);
}

const target = (doc, id) => doc.extensions.find((e) => e.type === 'trace_control')
  .status.targets.find((t) => t.target === id);

// Polls `status --json` until pred(doc) holds (bounded).
async function waitStatus(sf, pred, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const doc = statusJson(sf);
    if (pred(doc)) return doc;
    if (Date.now() > deadline) throw new Error(`status never showed ${what}: ${JSON.stringify(doc)}`);
    await sleep(100);
  }
}

async function gatewaySetup(h, name, extra = {}) {
  const gw = new Gateway();
  await gw.start();
  h.onCleanup(() => gw.stop());
  const fx = await tcSetup(h, name, {
    match: true,
    env: { GATEWAY_TOKEN: TOKEN },
    exporters: {
      otlphttp: { endpoint: gw.url, sending_queue: { queue_size: 64 },
        headers: { Authorization: 'Bearer ${env:GATEWAY_TOKEN}' } },
    },
    ...extra,
  });
  return { gw, ...fx };
}

test('status and --json: an open window\'s own counts move while spans arrive; then its close; per-window series', async () => {
  await harness('operator_status', async (h) => {
    const { sf, sock, gw } = await gatewaySetup(h, 'status');
    const exporter = () => makeExporter('grpc', { grpcPort: sf.grpcPort, compression: 'none' });
    const set = () => control(sock, { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-24 status' });
    assert.equal((await set()).ok, true);

    await peers.sendSpansThrough(exporter(), { n: 5, resource: { 'service.instance.id': 'r1' } });
    let doc = await waitStatus(sf, (d) => target(d, 'r1').window && target(d, 'r1').window.accepted_from_target === 5,
      '5 spans from r1 in its window');
    let t = target(doc, 'r1');
    assert.equal(t.state, 'open');
    assert.equal(t.level, 3);
    assert.equal(t.window.level, 3);
    assert.equal(t.window.accepted, 5);
    assert.equal(t.window.lost, 0);
    assert.ok(t.window.left_ms > 0 && t.window.left_ms <= 600000, JSON.stringify(t.window));
    assert.equal(doc.pipelines[0].exporters[0], 'otlphttp');
    assert.equal(doc.exporters[0].endpoint, gw.url);
    assert.equal(doc.reload.count, 0);

    // the screen, from the config file alone
    const r = cli(sf, ['status', '--config', sf.configPath]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^pipeline traces: otlp -> \(none\) -> otlphttp$/m);
    assert.match(r.stdout, /^ {2}r1: level 3 \(set [0-9T:.-]+Z\), open\n {4}window r1-\d+ at level 3, (9|10)m\d\ds left \(until [0-9T:.-]+Z\): 5 spans accepted, \d+ exported, 0 lost, \d+ queued; from the target 5 accepted, 0 refused$/m);
    assert.doesNotMatch(r.stdout, /refused: |dropped: |send failed: /, 'only non-zero reasons, and there are none');
    assert.ok(!r.stdout.includes(TOKEN));

    await peers.sendSpansThrough(exporter(), { n: 7, resource: { 'service.instance.id': 'r1' } });
    await peers.sendSpansThrough(exporter(), { n: 3, resource: { 'service.instance.id': 'r9' } });
    doc = await waitStatus(sf, (d) => target(d, 'r1').window.accepted === 15, '15 spans in the window');
    t = target(doc, 'r1');
    assert.equal(t.window.accepted_from_target, 12);
    assert.ok(t.window.left_ms <= 600000);

    // the same window on /metrics, and --metrics instead of --config
    const m = await sf.waitMetrics((x) => x.get('spanfence_trace_control_window_spans',
      { target: 'r1', state: 'open', count: 'accepted' }) === 15, 'the window\'s series');
    assert.equal(m.must('spanfence_trace_control_window_spans', { target: 'r1', state: 'open', count: 'accepted_from_target' }), 12);
    assert.ok(m.must('spanfence_trace_control_window_seconds_left', { target: 'r1', level: '3' }) > 0);
    const r2 = cli(sf, ['status', '--metrics', `127.0.0.1:${sf.metricsPort}`], { keepMetrics: false });
    assert.equal(r2.status, 0, r2.stderr);
    assert.match(r2.stdout, /15 spans accepted/);

    const first = t.window.id;
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    doc = await waitStatus(sf, (d) => target(d, 'r1').last_window !== null, 'the closed window');
    t = target(doc, 'r1');
    assert.equal(t.window, null);
    assert.equal(t.last_window.id, first);
    assert.equal(t.last_window.cause, 'reset');
    assert.equal(t.last_window.accepted, 15);
    assert.equal(t.last_window.complete, true, JSON.stringify(t.last_window));
    assert.equal(t.last_window.capture, 'complete at the collector', 'no engine_log: the engine\'s own drops unseen');
    assert.equal(gw.spans.filter((s) => !s.name.startsWith('trace_control')).length, 15);

    // a second window, with no span: empty, not complete; the series keep
    // its open one and the last closed one, no more
    assert.equal((await set()).ok, true);
    assert.equal((await control(sock, { op: 'reset', target: 'r1' })).ok, true);
    doc = await waitStatus(sf, (d) => target(d, 'r1').last_window && target(d, 'r1').last_window.id !== first,
      'the second window closed');
    const second = target(doc, 'r1').last_window.id;
    const m2 = await sf.metrics();
    const windows = new Set(m2.samples.filter((s) => s.name.startsWith('spanfence_trace_control_window_'))
      .map((s) => s.labels.window));
    assert.deepEqual([...windows], [second]);
    assert.equal(m2.must('spanfence_trace_control_window_complete', { window: second }), 0, 'an empty window is not complete');
    assert.equal(target(doc, 'r1').last_window.capture, 'empty');
    assert.equal(m2.get('spanfence_trace_control_window_spans', { state: 'open' }), undefined);
  });
});

test('STATUS= lists the open window for systemctl status', async () => {
  await harness('operator_status', async (h) => {
    const n = await notifyOn(h, 'notify.sock');
    const { sock } = await tcSetup(h, 'notify', { env: { NOTIFY_SOCKET: n.path, WATCHDOG_USEC: '2000000' } });
    assert.equal((await control(sock, { op: 'set', target: 'r1', level: 3, for_ms: 600000, reason: 'INC-24' })).ok, true);
    await n.waitFor((m) => /^STATUS=last minute: .*; windows: r1 level 3 (9|10)m\d\ds left \(0 accepted, 0 lost\)$/.test(m),
      'a STATUS line with the window');
  });
});

test('the watchdog is fed while the pipeline makes progress: a gateway down (retries, backoff) is not a stuck pipeline', async () => {
  await harness('operator_status', async (h) => {
    const n = await notifyOn(h, 'notify-wd.sock');
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    gw.setStatus(503);
    const { sf } = await tcSetup(h, 'watchdog', {
      env: { NOTIFY_SOCKET: n.path, WATCHDOG_USEC: '2000000' },
      exporters: {
        otlphttp: { endpoint: gw.url, timeout: '1s', sending_queue: { queue_size: 64 },
          retry_on_failure: { initial_interval: '100ms', max_interval: '200ms', max_elapsed_time: '10m' } },
      },
    });
    await peers.sendSdkSpans({ port: sf.grpcPort, n: 4 });
    await sf.waitMetrics((m) => m.get('spanfence_exporter_retries') >= 3, 'retries against the down gateway');
    // pings go on (half of WatchdogSec=2s: one a second), through the retries
    const seen = n.msgs.length;
    await n.waitFor(() => n.msgs.slice(seen).filter((x) => x === 'WATCHDOG=1').length >= 3,
      'three pings while retrying', 60000);
    assert.ok(!n.msgs.some((m) => m.startsWith('STATUS=stuck')), JSON.stringify(n.msgs));
    assert.ok((await sf.metrics()).must('spanfence_exporter_queued_spans') > 0, 'the spans are still queued');
    // the last minute's figures (the STATUS= samples) in status too
    const doc = await waitStatus(sf, (d) => d.recent && d.recent.accepted === 4, 'the 4 spans in the last minute');
    assert.equal(doc.recent.exported, 0);
    assert.ok(doc.recent.seconds <= 70, JSON.stringify(doc.recent));
    assert.match(cli(sf, ['status', '--config', sf.configPath]).stdout,
      /^spans in the last \d+ s: 4 accepted, 0 exported, 0 lost$/m);

    // the gateway now refuses for good: the loss shows with its one reason
    gw.setStatus(400);
    await waitStatus(sf, (d) => d.spans.send_failed.permanent_error === 4, 'the 4 spans failed for good');
    const screen = cli(sf, ['status', '--config', sf.configPath]).stdout;
    assert.match(screen, /^spans since start: 4 accepted, 0 exported, 0 queued, 4 lost; send failed: permanent_error 4$/m);
    assert.match(screen, /^ {2}exporter otlphttp -> http:\/\/127\.0\.0\.1:\d+: 0 sent, 0 queued \(queue 0\/64\), \d+ retries, send failed: permanent_error 4$/m);
    const all = cli(sf, ['status', '--all', '--config', sf.configPath]).stdout;
    assert.match(all, /; refused: malformed 0, too_large 0, .*; send failed: malformed 0, .*permanent_error 4/);
  });
});

test('reload --pid: 0 when the new config runs, 1 when it is refused or cannot start (port in use)', async () => {
  await harness('operator_status', async (h) => {
    const { sf } = await tcSetup(h, 'reload', {
      processors: {
        'transform/allow': { trace_statements: [{ context: 'span', statements: ['keep_keys(attributes, ["model"])'] }] },
      },
    });
    const before = statusJson(sf).processors[0].allowlist;
    assert.match(before.sha256, /^[0-9a-f]{64}$/);
    const text = fs.readFileSync(sf.configPath, 'utf8').replace('["model"]', '["model", "route"]');
    fs.writeFileSync(sf.configPath, text);
    let r = cli(sf, ['reload', '--pid', String(sf.pid), '--config', sf.configPath]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /running the new configuration/);
    // what leaves changed: so did the allowlist's digest
    const after = statusJson(sf).processors[0].allowlist;
    assert.match(after.sha256, /^[0-9a-f]{64}$/);
    assert.notEqual(after.sha256, before.sha256);
    assert.match(cli(sf, ['status', '--config', sf.configPath]).stdout,
      new RegExp(`^ {2}processor transform/allow: allowlist sha256 ${after.sha256.slice(0, 16)}\\.\\.\\. \\(1 rule\\)$`, 'm'));

    // valid, but its gRPC port is taken: validate passes, start fails
    const busy = net.createServer();
    await new Promise((res) => busy.listen(0, '127.0.0.1', res));
    h.onCleanup(() => new Promise((res) => busy.close(res)));
    fs.writeFileSync(sf.configPath, text.replace('127.0.0.1:${env:SF_GRPC_PORT}', `127.0.0.1:${busy.address().port}`));
    const v = cli(sf, ['validate', '--config', sf.configPath]);
    assert.equal(v.status, 0, v.stderr);
    r = cli(sf, ['reload', '--pid', String(sf.pid), '--config', sf.configPath]);
    assert.equal(r.status, 1, r.stdout);
    assert.match(r.stderr, /^spanfence: reload failed: the new configuration could not start \(see the log\); running the previous one$/m);
    let doc = statusJson(sf);
    assert.equal(doc.reload.count, 2);
    assert.equal(doc.reload.ok, false);
    const screen = cli(sf, ['status', '--config', sf.configPath]);
    assert.match(screen.stdout, /^reload: FAILED at [0-9T:.-]+Z \(2 since start\): the new configuration could not start/m);

    // not valid at all
    fs.writeFileSync(sf.configPath, `${text}\nbogus_key: 1\n`);
    r = cli(sf, ['reload', '--pid', String(sf.pid), '--config', sf.configPath]);
    assert.equal(r.status, 1, r.stdout);
    assert.match(r.stderr, /reload failed: the new configuration is not valid/);

    // and the previous config still runs: spans go through
    fs.writeFileSync(sf.configPath, text);
    await peers.sendSdkSpans({ port: sf.grpcPort, n: 3 });
    doc = await waitStatus(sf, (d) => d.spans.accepted === 3, '3 spans accepted after the failed reloads');
    assert.equal(doc.reload.count, 3);
  });
});

test('print-config: defaults filled in, ${env:...} expanded, every secret redacted, identifiers kept; its output validates', async () => {
  await harness('operator_status', async (h) => {
    const dir = path.join(h.dir, 'print');
    fs.mkdirSync(dir, { recursive: true });
    const cfg = path.join(dir, 'c.yaml');
    const secrets = ['gw-Token-1', 'engine-Key-2', 'url-Pass-3', 'pseudo-Key-4-0123456789abcdef0123456789abcdef',
      'api-Header-5', 'cookie-Header-6'];
    fs.writeFileSync(cfg, `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:\${env:SF_PRINT_PORT}
processors:
  transform/allow:
    pseudonym_key: "\${env:SF_PSEUDO}"
    trace_statements:
      - context: span
        statements:
          - keep_keys(attributes, ["model"])
          - pseudonymize(attributes, "model")
exporters:
  otlphttp/gw:
    endpoint: https://spanfence:\${env:SF_URL_PASS}@gw.example:4318
    headers: {Authorization: "Bearer \${env:SF_GW_TOKEN}", X-Api-Key: "${secrets[4]}", Cookie: "s=${secrets[5]}",
              X-Tenant: tenant-7, x-vm-id: "\${env:SF_VM_ID}"}
extensions:
  trace_control:
    socket: ${dir}/tc.sock
    audit_log: ${dir}/audit.jsonl
    levels: [0, 3]
    targets:
      r1:
        endpoint: http://127.0.0.1:1/set_trace_level
        headers: {Authorization: "Bearer \${env:SF_ENGINE_KEY}"}
service:
  extensions: [trace_control]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [transform/allow]
      exporters: [otlphttp/gw]
`);
    const env = { ...process.env, SF_PRINT_PORT: '4999', SF_GW_TOKEN: secrets[0], SF_ENGINE_KEY: secrets[1],
      SF_URL_PASS: secrets[2], SF_PSEUDO: secrets[3], SF_VM_ID: 'vm-0a1b' };
    const r = spawnSync(deps.spanfenceBin(), ['print-config', '--config', cfg, '--set', 'exporters.otlphttp/gw.timeout=7s'],
      { encoding: 'utf8', env, timeout: 60000 });
    assert.equal(r.status, 0, r.stderr);
    for (const s of secrets) assert.ok(!r.stdout.includes(s), `secret '${s}' printed:\n${r.stdout}`);
    assert.match(r.stdout, /^ {8}endpoint: 127\.0\.0\.1:4999$/m, 'the ${env:} value expanded');
    assert.match(r.stdout, /^ {4}endpoint: 'https:\/\/\[REDACTED\]@gw\.example:4318'$/m);
    assert.match(r.stdout, /^ {6}Authorization: '\[REDACTED\]'$/m);
    assert.match(r.stdout, /^ {6}X-Api-Key: '\[REDACTED\]'$/m);
    assert.match(r.stdout, /^ {6}Cookie: '\[REDACTED\]'$/m);
    // identifiers are not credentials (issue 37)
    assert.match(r.stdout, /^ {6}X-Tenant: tenant-7$/m);
    assert.match(r.stdout, /^ {6}x-vm-id: 'vm-0a1b'$/m);   // quoted in the file: quoted
    assert.match(r.stdout, /^ {4}pseudonym_key: '\[REDACTED\]'$/m);
    assert.match(r.stdout, /^ {4}timeout: 7s$/m, 'the --set merged');
    assert.match(r.stdout, /^ {6}queue_size: 1000$/m, 'a default of the sending queue');
    assert.match(r.stdout, /^ {4}grace_period: 5s$/m, 'a default of trace_control');
    assert.doesNotMatch(r.stdout, /^ {6}http:$/m, 'a protocol not configured is not shown as served');

    // what it prints is a config: validate takes it (given a pseudonym key
    // again: '[REDACTED]' is shorter than a key may be)
    const out = path.join(dir, 'printed.yaml');
    fs.writeFileSync(out, r.stdout);
    const v = spawnSync(deps.spanfenceBin(), ['validate', '--config', out,
      '--set', 'processors.transform/allow.pseudonym_key=another-key-of-16-bytes-or-more'],
    { encoding: 'utf8', env, timeout: 60000 });
    assert.equal(v.status, 0, v.stderr + v.stdout);
  });
});
