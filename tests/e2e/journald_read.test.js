// tests/e2e/journald_read.test.js: the journald receiver reading journal
// files written by the real journal code: systemd-journal-remote (Debian's
// systemd-journal-remote) turns journal export text into a journal file in
// a directory the receiver reads through `directory`, appending to it as
// the test goes. The collector exports OTLP/HTTP to a stand-in gateway
// that decodes every request on its own. It shows:
//  - every record of the unit, at the configured priority or above,
//    arrives once, with its time (__REALTIME_TIMESTAMP), severity
//    (PRIORITY, as upstream maps it), its three attributes and nothing else
//    of the entry (_CMDLINE carries a secret); other units and debug
//    records do not arrive;
//  - a restart (SIGTERM, more records written while down, start again)
//    and a SIGHUP reload (records written around it) lose and repeat
//    nothing: the cursor_file and the cursor handed over by the reload;
//  - SGLang's statistics lines pass the logs fence (a transform with
//    log_statements keeping only bodies in those shapes); a line quoting a
//    prompt leaves without its body; a message that is not UTF-8 is
//    repaired and one past max_message_size cut, each counted;
//  - without cursor_file, a reload still loses and repeats nothing (the
//    cursor is handed over in memory: suspend/resume);
//  - a pipeline that refuses (the exporter's queue full while the gateway
//    answers 503): the receiver keeps its batch and the cursor, sends it
//    again after a backoff, and every record still arrives once.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { SignalGateway } = require('./lib/signal_gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp } = require('./lib/config');

const JOURNAL_REMOTE = '/lib/systemd/systemd-journal-remote';
const BOOT = '0123456789abcdef0123456789abcdef';
const T0 = 1796000000000000;     // µs since the epoch: the first record's time
const SECRETS = ['my secret', 'SECRET-KEY', 'tell me'];

// SGLang's statistics lines, as its logger prints them
// ("[%(asctime)s TP0] %(message)s"), and the fence's rule for them.
const STATS_RE = '^\\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}( TP[0-9]{1,3})?\\] ' +
  '(Prefill batch\\. #new-seq: [0-9]+, #new-token: [0-9]+, #cached-token: [0-9]+, token usage: [0-9.]+, ' +
  '#running-req: [0-9]+, #queue-req: [0-9]+|Decode batch\\. #running-req: [0-9]+, #token: [0-9]+, ' +
  'token usage: [0-9.]+, gen throughput \\(token/s\\): [0-9.]+, #queue-req: [0-9]+)$';
const ottl = (re) => re.replace(/\\/g, '\\\\');

function config({ dir, cursor, gateway, grpc, metrics, maxBatch = 7, queue = {} }) {
  return collectorConfig({
    receivers: {
      otlp: otlpReceiver({ grpc }),
      journald: {
        directory: dir, start_at: 'beginning', units: ['sglang'], priority: 'info',
        cursor_file: cursor || undefined, max_batch_records: maxBatch,
      },
    },
    processors: {
      'transform/fence': {
        error_mode: 'propagate',
        log_statements: [
          { context: 'resource', statements: ['keep_keys(attributes, [])'] },
          { context: 'log',
            statements: ['keep_keys(attributes, ["_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_PID"])',
                         `set(body, nil) where not IsMatch(body, "${ottl(STATS_RE)}")`] },
        ],
      },
    },
    exporters: { otlphttp: otlphttp(gateway, queue) },
    metricsPort: metrics,
    pipelines: { logs: { receivers: ['otlp', 'journald'], processors: ['transform/fence'], exporters: ['otlphttp'] } },
  });
}

// The records of the test, by number: what the journal gets, and what must
// leave (null: nothing, filtered out by unit or priority).
let seq = 0;
function record(kind) {
  const n = seq++;
  const t = T0 + n * 1000000;
  const stamp = new Date(t / 1000).toISOString().replace('T', ' ').slice(0, 19);
  const e = {
    n, t, unit: 'sglang.service', ident: 'python3', pid: String(4000 + n), priority: '6',
    cmdline: 'python3 -m sglang.launch_server --api-key SECRET-KEY',
  };
  switch (kind) {
    case 'prefill':
      e.message = `[${stamp} TP0] Prefill batch. #new-seq: 1, #new-token: ${7 + n}, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0`;
      e.keep = true;
      break;
    case 'decode':
      e.message = `[${stamp} TP0] Decode batch. #running-req: 1, #token: ${24 + n}, token usage: 0.00, gen throughput (token/s): 35.12, #queue-req: 0`;
      e.keep = true;
      break;
    case 'prompt':   // an error quoting a request: must leave without its body
      e.message = `[${stamp} TP0] Error in request rid=${n}: prompt='tell me my secret ${n}'`;
      e.priority = '3';
      break;
    case 'warning':
      e.message = `[${stamp} TP0] Queue is full, likely spans will be dropped.`;
      e.priority = '4';
      break;
    case 'other-unit':
      e.message = `sshd: Accepted publickey for root ${n}`;
      e.unit = 'ssh.service';
      e.absent = true;
      break;
    case 'debug':
      e.message = `[${stamp} TP0] debug detail ${n}`;
      e.priority = '7';
      e.absent = true;
      break;
    case 'binary':   // not UTF-8: repaired, then fenced
      e.message = Buffer.concat([Buffer.from(`bytes ${n}: `), Buffer.from([0xff, 0xfe, 0x80])]);
      break;
    case 'huge':     // past max_message_size (16 KiB): cut, then fenced
      e.message = `huge ${n} ` + 'x'.repeat(40000);
      break;
    default:
      throw new Error(kind);
  }
  return e;
}

// One entry in the journal export format (binary-safe for a Buffer message).
function exportEntry(e) {
  const text = (k, v) => Buffer.from(`${k}=${v}\n`);
  const parts = [
    text('__REALTIME_TIMESTAMP', e.t), text('__MONOTONIC_TIMESTAMP', 1000 + e.n), text('_BOOT_ID', BOOT),
    text('PRIORITY', e.priority), text('_SYSTEMD_UNIT', e.unit), text('SYSLOG_IDENTIFIER', e.ident),
    text('_PID', e.pid), text('_CMDLINE', e.cmdline),
  ];
  if (Buffer.isBuffer(e.message)) {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(e.message.length));
    parts.push(Buffer.from('MESSAGE\n'), len, e.message, Buffer.from('\n'));
  } else {
    parts.push(text('MESSAGE', e.message));
  }
  parts.push(Buffer.from('\n'));
  return Buffer.concat(parts);
}

// The records appended to the journal file by the real journal code.
function append(file, entries) {
  const r = spawnSync(JOURNAL_REMOTE, [`--output=${file}`, '-'], { input: Buffer.concat(entries.map(exportEntry)) });
  assert.equal(r.status, 0, `systemd-journal-remote failed: ${r.stderr}`);
  return entries;
}

const batch = (kinds) => kinds.map(record);

test('journald: every record once, across a restart and a reload, through the logs fence', async () => {
  assert.ok(fs.existsSync(JOURNAL_REMOTE), `${JOURNAL_REMOTE} missing: run tools/setup.sh (systemd-journal-remote)`);
  await harness('journald_read', async (h) => {
    const gw = new SignalGateway('gateway');
    await gw.start();
    h.onCleanup(() => gw.stop());
    const dir = path.join(h.dir, 'journal');
    fs.mkdirSync(dir);
    const file = path.join(dir, 'remote.journal');
    const cursor = path.join(h.dir, 'journald.cursor');
    const written = [];
    const leaving = () => written.filter((e) => !e.absent).length;
    const ports = { grpc: await freePort(), metrics: await freePort() };
    const cfg = config({ dir, cursor, gateway: gw.url, ...ports });
    const start = async (name) => h.track(new Spanfence({
      dir: h.dir, name, config: cfg, grpcPort: ports.grpc, metricsPort: ports.metrics,
    })).start();
    const sel = { receiver: 'journald', transport: '' };
    const arrived = (what, n) => gw.waitFor(() => gw.logs.length >= n, `${what}: ${n} records at the gateway`);

    // 1. the journal before the collector: read from the beginning
    written.push(...append(file, batch(['prefill', 'decode', 'prompt', 'other-unit', 'decode', 'debug',
      'warning', 'binary', 'huge', 'prefill', 'decode', 'decode', 'prompt', 'decode'])));
    let sf = await start('first');
    await arrived('first run', leaving());
    let m = await sf.waitMetrics((x) => x.get('otelcol_receiver_accepted_log_records', sel) === leaving(),
      'the first run\'s records accepted');
    assert.equal(m.must('spanfence_receiver_journald_invalid_utf8_messages'), 1, 'one message repaired');
    assert.equal(m.must('spanfence_receiver_journald_truncated_messages'), 1, 'one message cut');
    assert.equal(m.must('otelcol_receiver_refused_log_records', sel), 0);
    // written while it runs: picked up from the journal's inotify watch
    written.push(...append(file, batch(['decode', 'prompt', 'prefill'])));
    await arrived('while running', leaving());
    await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_log_records') === leaving(), 'sent before the stop');
    await sf.stop();
    assert.ok(fs.readFileSync(cursor, 'utf8').startsWith('s='), 'cursor_file holds a journal cursor');

    // 2. written while the collector is down: read after a restart, nothing twice
    const before = leaving();
    written.push(...append(file, batch(['decode', 'other-unit', 'prefill', 'prompt', 'decode'])));
    sf = await start('second');
    await sf.waitLog(/receiver journald: reading the journal in '.*' after the cursor in cursor_file/, 'resumed from cursor_file');
    await arrived('after the restart', leaving());

    // 3. a reload with records written just before and after the SIGHUP
    written.push(...append(file, batch(['decode', 'decode', 'prompt'])));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload');
    await sf.waitLog(/after the cursor handed over by the reload/, 'the cursor handed over');
    written.push(...append(file, batch(['prefill', 'decode', 'debug', 'warning', 'decode'])));
    await arrived('after the reload', leaving());
    // this process's counts (carried over the reload): what was written since the restart
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_log_records') === leaving() - before,
      'every record since the restart sent');
    assert.equal(m.must('otelcol_receiver_accepted_log_records', sel), leaving() - before);
    assert.equal(m.must('otelcol_receiver_refused_log_records', sel), 0);
    assert.equal(m.must('spanfence_receiver_journald_retries'), 0);
    assert.equal(m.must('spanfence_receiver_journald_read_errors'), 0);
    await sf.stop();

    // every record once: by time (unique per record), nothing missing, nothing twice
    const byTime = new Map();
    for (const g of gw.logs) {
      const n = Math.round((g.timeUnixNano / 1000 - T0) / 1000000);
      assert.ok(!byTime.has(n), `record ${n} arrived twice`);
      byTime.set(n, g);
    }
    for (const e of written) {
      const g = byTime.get(e.n);
      if (e.absent) {
        assert.equal(g, undefined, `record ${e.n} (${e.unit}, priority ${e.priority}) must not be read`);
        continue;
      }
      assert.ok(g, `record ${e.n} arrived`);
      assert.equal(g.timeUnixNano, e.t * 1000, `record ${e.n}: time from __REALTIME_TIMESTAMP`);
      const sev = { 3: [17, 'error'], 4: [13, 'warn'], 6: [9, 'info'] }[e.priority];
      assert.deepEqual([g.severityNumber, g.severityText], sev, `record ${e.n}: severity from PRIORITY ${e.priority}`);
      assert.deepEqual(g.attributes, { _SYSTEMD_UNIT: 'sglang.service', SYSLOG_IDENTIFIER: 'python3', _PID: e.pid },
        `record ${e.n}: the three attributes, nothing else of the entry`);
      if (e.keep) assert.equal(g.body, e.message, `record ${e.n}: a statistics line leaves as it is`);
      else assert.ok(g.body === undefined || g.body === '', `record ${e.n}: body must not leave: ${JSON.stringify(g.body)}`);
    }
    assert.equal(byTime.size, leaving(), 'as many records as were written for the unit at info or above');
    assert.ok(written.filter((e) => e.keep).length >= 10, 'test data: statistics lines');
    const all = JSON.stringify(gw.logs);
    for (const s of SECRETS) assert.ok(!all.includes(s), `'${s}' left the VM`);
    for (const r of gw.of('logs')) assert.equal(r.status, 200);
  });
});

test('journald: a full queue holds the batch and the cursor; sent again, nothing lost or repeated', async () => {
  await harness('journald_full', async (h) => {
    const gw = new SignalGateway('gateway');
    await gw.start();
    h.onCleanup(() => gw.stop());
    gw.setStatus(503);
    const dir = path.join(h.dir, 'journal');
    fs.mkdirSync(dir);
    const file = path.join(dir, 'remote.journal');
    const ports = { grpc: await freePort(), metrics: await freePort() };
    const cfg = config({
      dir, cursor: path.join(h.dir, 'journald.cursor'), gateway: gw.url, ...ports, maxBatch: 2,
      queue: {
        sending_queue: { queue_size: 1, num_consumers: 1 },
        retry_on_failure: { initial_interval: '50ms', max_interval: '100ms', max_elapsed_time: '120s' },
      },
    });
    const written = append(file, batch(['decode', 'prefill', 'prompt', 'decode', 'decode', 'warning',
      'prefill', 'decode', 'prompt', 'decode', 'decode', 'prefill']));
    const sf = h.track(new Spanfence({ dir: h.dir, name: 'full', config: cfg, grpcPort: ports.grpc, metricsPort: ports.metrics }));
    await sf.start();
    const sel = { receiver: 'journald', transport: '' };
    // one batch in flight, one queued, the next refused: kept and retried
    const m = await sf.waitMetrics((x) => x.get('spanfence_receiver_journald_retries') >= 2,
      'the receiver retrying a refused batch');
    assert.ok(m.must('otelcol_receiver_refused_log_records', { ...sel, reason: 'queue_full' }) >= 2,
      'the refusals counted as queue_full');
    assert.ok(m.must('otelcol_receiver_accepted_log_records', sel) < written.length, 'not everything accepted yet');
    gw.setStatus(200);
    await gw.waitFor(() => gw.logs.length >= written.length, `${written.length} records at the gateway`);
    await sf.waitMetrics((x) => x.get('otelcol_receiver_accepted_log_records', sel) === written.length &&
      x.get('otelcol_exporter_sent_log_records') === written.length, 'every record accepted once and sent');
    await sf.stop();
    const times = gw.logs.map((g) => g.timeUnixNano);
    assert.equal(new Set(times).size, times.length, 'no record twice');
    assert.deepEqual([...times].sort((a, b) => a - b), written.map((e) => e.t * 1000), 'every record, in order of writing');
  });
});

test('journald: without cursor_file a reload hands the cursor over in memory', async () => {
  await harness('journald_memory', async (h) => {
    const gw = new SignalGateway('gateway');
    await gw.start();
    h.onCleanup(() => gw.stop());
    const dir = path.join(h.dir, 'journal');
    fs.mkdirSync(dir);
    const file = path.join(dir, 'remote.journal');
    const ports = { grpc: await freePort(), metrics: await freePort() };
    const cfg = config({ dir, cursor: null, gateway: gw.url, ...ports });
    const written = append(file, batch(['decode', 'prefill', 'decode', 'prompt', 'decode']));
    const sf = h.track(new Spanfence({ dir: h.dir, name: 'memory', config: cfg, grpcPort: ports.grpc, metricsPort: ports.metrics }));
    await sf.start();
    await gw.waitFor(() => gw.logs.length >= written.length, 'before the reload');
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/after the cursor handed over by the reload/, 'the cursor handed over');
    written.push(...append(file, batch(['prefill', 'decode', 'warning'])));
    await gw.waitFor(() => gw.logs.length >= written.length, 'after the reload');
    await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_log_records') === written.length &&
      x.get('otelcol_receiver_accepted_log_records', { receiver: 'journald', transport: '' }) === written.length,
    'every record accepted once and sent');
    await sf.stop();
    const times = gw.logs.map((g) => g.timeUnixNano);
    assert.deepEqual([...times].sort((a, b) => a - b), written.map((e) => e.t * 1000), 'every record once');
  });
});
