// tests/e2e/cvm_three_signals.test.js: configs/cvm.yaml as shipped, the VM's
// one collector for all three signals, with only what a test must move
// moved: its ports, the engine's metrics port (SGLang's 30000) to a real
// exposer (Debian's python3-prometheus-client serving SGLang's families,
// prometheus_exposer.py, with a prompt in one label), and its journald
// receiver to journal files written by the real journal code
// (systemd-journal-remote) with SGLang's unit's lines: two statistics lines
// as SGLang prints them to stdout and an error quoting a prompt. The moved
// config still holds configs/cvm-policy.yaml. At the gateway (decoded by
// the independent protobufjs decoder): SGLang's series with their values
// and bucket bounds, its statistics lines as printed, the error without its
// body, the unit as the one log attribute; and in no exported byte the
// prompts, the model's name (a free-text label cvm.yaml leaves out) or the
// process's command line.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const deps = require('./lib/deps');
const { SignalGateway } = require('./lib/signal_gateway');
const { Spanfence, harness, freePort, waitUntil } = require('./lib/spanfence');
const { startExposer } = require('./lib/exposer');

const JOURNAL_REMOTE = '/lib/systemd/systemd-journal-remote';
const BOOT = '0123456789abcdef0123456789abcdef';
const T0 = 1796000000000000;     // µs since the epoch
const KEY = 'cvm-three-signals-pseudonym-key-0123456789';
const LOG_SECRET = 'SECRET-LOG tell me everything';
const CMDLINE_SECRET = 'SECRET-CMDLINE';
const STAMP = '[2026-12-06 07:00:00 TP0] ';
const LINES = [
  { message: `${STAMP}Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, `,
    keep: true },
  { message: `${STAMP}Decode batch, #running-req: 1, #token: 24, token usage: 0.00, cuda graph: True, gen throughput (token/s): 35.12, #queue-req: 0, `,
    keep: true },
  { message: `${STAMP}Error in request 7: prompt='${LOG_SECRET}'`, keep: false, priority: '3' },
];

function exportEntry(e, n) {
  const f = (k, v) => `${k}=${v}\n`;
  return Buffer.from(f('__REALTIME_TIMESTAMP', T0 + n * 1000000) + f('__MONOTONIC_TIMESTAMP', 1000 + n) +
    f('_BOOT_ID', BOOT) + f('PRIORITY', e.priority || '6') + f('_SYSTEMD_UNIT', 'sglang.service') +
    f('SYSLOG_IDENTIFIER', 'python3') + f('_PID', '4242') +
    f('_CMDLINE', `python3 -m sglang.launch_server --api-key ${CMDLINE_SECRET}`) + f('MESSAGE', e.message) + '\n');
}

// cvm.yaml with its ports, the engine's metrics target and its journal moved.
function moved(ports, journalDir, cursor) {
  const file = path.join(process.env.SF_SOURCE_DIR, 'configs', 'cvm.yaml');
  let text = fs.readFileSync(file, 'utf8');
  const swap = (from, to) => {
    assert.equal(text.split(from).length, 2, `configs/cvm.yaml: '${from}' is not there once`);
    text = text.replace(from, to);
  };
  swap('endpoint: 127.0.0.1:4317', `endpoint: 127.0.0.1:${ports.grpc}`);
  swap('endpoint: 127.0.0.1:4318', `endpoint: 127.0.0.1:${ports.http}`);
  swap('address: 127.0.0.1:8888', `address: 127.0.0.1:${ports.metrics}`);
  swap('targets: ["127.0.0.1:30000"]', `targets: ["127.0.0.1:${ports.exposer}"]`);
  swap('    units: [sglang]\n', `    units: [sglang]\n    directory: ${journalDir}\n    start_at: beginning\n`);
  swap('cursor_file: /var/lib/spanfence/journald.cursor', `cursor_file: ${cursor}`);
  return text;
}

test('cvm.yaml carries the engine\'s metrics and logs through its fence, and they hold its policy', async () => {
  assert.ok(fs.existsSync(JOURNAL_REMOTE), `${JOURNAL_REMOTE} missing: run tools/setup.sh (systemd-journal-remote)`);
  await harness('cvm_three_signals', async (h) => {
    const gw = new SignalGateway('gateway');
    gw.keepBodies = true;
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = { grpc: await freePort(), http: await freePort(), metrics: await freePort(), exposer: await freePort() };
    const exposed = await startExposer(h, ports.exposer);
    const secret = exposed.secret || 'SECRET-PROMPT';
    const journalDir = path.join(h.dir, 'journal');
    fs.mkdirSync(journalDir);
    const r = spawnSync(JOURNAL_REMOTE, [`--output=${path.join(journalDir, 'remote.journal')}`, '-'],
      { input: Buffer.concat(LINES.map(exportEntry)) });
    assert.equal(r.status, 0, `systemd-journal-remote failed: ${r.stderr}`);

    const config = moved(ports, journalDir, path.join(h.dir, 'journald.cursor'));
    const env = { SPANFENCE_GATEWAY_ENDPOINT: `http://127.0.0.1:${gw.port}`, SPANFENCE_GATEWAY_TOKEN: 'cvm-token',
                  SPANFENCE_PSEUDONYM_KEY: KEY };
    const cfgPath = path.join(h.dir, 'cvm.yaml');
    fs.writeFileSync(cfgPath, config);
    const v = spawnSync(deps.spanfenceBin(), ['validate', '--config', cfgPath, '--policy',
      path.join(process.env.SF_SOURCE_DIR, 'configs', 'cvm-policy.yaml')], { env: { ...process.env, ...env } });
    assert.equal(v.status, 0, `the moved cvm.yaml does not hold the policy:\n${v.stdout}${v.stderr}`);

    const sf = h.track(new Spanfence({ dir: h.dir, config, env, grpcPort: ports.grpc, metricsPort: ports.metrics }));
    await sf.start();
    await waitUntil(() => gw.logs.length >= LINES.length &&
      gw.points.some((p) => p.name === 'sglang:num_running_reqs') &&
      gw.points.some((p) => p.name === 'sglang:time_to_first_token_seconds'),
    'the journal\'s lines and a scrape at the gateway', 60000);
    await sf.stop();

    // nothing of the prompts, the model's name or the command line, in any byte
    for (const req of gw.requests) {
      assert.equal(req.status, 200, `${req.path}: ${req.error}`);
      const raw = req.body.toString('latin1');
      for (const s of [secret, 'SECRET-PROMPT', LOG_SECRET, 'SECRET-LOG', CMDLINE_SECRET, 'Llama-3.1']) {
        assert.ok(!raw.includes(s), `'${s}' left in ${req.path}`);
      }
    }
    // logs: the statistics lines as printed, the error without its body,
    // the unit as the one attribute
    assert.equal(gw.logs.length, LINES.length);
    for (let i = 0; i < LINES.length; i++) {
      const l = gw.logs.find((x) => x.timeUnixNano === (T0 + i * 1000000) * 1000);
      assert.ok(l, `journal line ${i} missing`);
      assert.deepEqual(l.attributes, { _SYSTEMD_UNIT: 'sglang.service' });
      if (LINES[i].keep) assert.equal(l.body, LINES[i].message);
      else assert.equal(l.body, undefined, 'the error line left with its body');
    }
    // metrics: SGLang's names (or the scrape's own), no model_name label,
    // values and bucket bounds as exposed
    const allowed = /^(sglang:[a-zA-Z0-9_]+|up|scrape_duration_seconds|scrape_samples_scraped|scrape_samples_post_metric_relabeling|scrape_series_added|other)$/;
    for (const p of gw.points) {
      assert.match(p.name, allowed);
      assert.ok(!('model_name' in p.attributes), `${p.name} kept model_name`);
      assert.deepEqual(p.resource, { 'service.name': 'sglang' });
    }
    const running = gw.points.find((p) => p.name === 'sglang:num_running_reqs');
    assert.equal(running.value, 3);
    const up = gw.points.find((p) => p.name === 'up');
    assert.equal(up.value, 1);
    const ttft = gw.points.find((p) => p.name === 'sglang:time_to_first_token_seconds');
    assert.equal(ttft.type, 'histogram');
  });
});
