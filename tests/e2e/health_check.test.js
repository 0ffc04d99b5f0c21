// tests/e2e/health_check.test.js: the health_check extension as a docker
// HEALTHCHECK or a probe written for otelcol sees it. The collector's start
// is held at a known point: the file exporter opens a FIFO at start, which
// blocks until the test opens it for reading. So:
//  - while starting (the FIFO not opened yet), the health endpoint already
//    listens and answers 503 with upstream's JSON body; once every
//    component has started, 200 "Server available";
//  - on SIGHUP the new config's file exporter opens a second FIFO: while
//    the reload waits on it, 503; then 200 again;
//  - on SIGTERM, while the otlphttp exporter drains a span it cannot send
//    (its gateway port is closed), 503; then the process exits 0;
//  - other paths get 404.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort } = require('./lib/config');

function config(fifo) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    exporters: {
      file: { path: fifo },
      'otlphttp/down': {
        endpoint: `http://127.0.0.1:${envPort('DOWN')}`,
        timeout: '3s',
        retry_on_failure: { initial_interval: '100ms', max_interval: '200ms', max_elapsed_time: '60s' },
      },
    },
    extensions: { health_check: { endpoint: `127.0.0.1:${envPort('HEALTH')}` } },
    metricsPort: envPort('METRICS'),
    serviceExtensions: ['health_check'],
    pipelines: { traces: { receivers: ['otlp'], exporters: ['file', 'otlphttp/down'] } },
  });
}

async function health(port, p = '/') {
  try {
    const r = await fetch(`http://127.0.0.1:${port}${p}`);
    return { status: r.status, type: r.headers.get('content-type'), body: await r.text() };
  } catch (_) {
    return null;        // not listening
  }
}

// Poll until the endpoint answers `status` (bounded); returns the answer.
async function waitHealth(port, status, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let last = null;
  for (;;) {
    last = await health(port);
    if (last && last.status === status) return last;
    if (Date.now() > deadline) {
      throw new Error(`health never answered ${status} ${what}; last: ${JSON.stringify(last)}`);
    }
    await sleep(20);
  }
}

// Opens the FIFO for reading and drains it (the exporter's open returns).
function openReader(fifo) {
  const s = fs.createReadStream(fifo);
  s.on('data', () => {});
  s.on('error', () => {});
  return s;
}

test('health_check: 503 while starting, reloading and shutting down, 200 while running', async () => {
  await harness('health_check', async (h) => {
    const ports = {
      SF_GRPC_PORT: await freePort(),
      SF_HTTP_PORT: await freePort(),
      SF_METRICS_PORT: await freePort(),
      SF_HEALTH_PORT: await freePort(),
      SF_DOWN_PORT: await freePort(),
    };
    const fifo1 = path.join(h.dir, 'out1.fifo');
    const fifo2 = path.join(h.dir, 'out2.fifo');
    execFileSync('mkfifo', [fifo1, fifo2]);
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(fifo1), env, grpcPort: ports.SF_GRPC_PORT,
      metricsPort: ports.SF_METRICS_PORT,
    }));
    const readers = [];
    h.onCleanup(() => readers.forEach((r) => r.destroy()));

    // ---- starting: the file exporter's open blocks on the FIFO
    let started = false;
    const starting = sf.start().then(() => { started = true; });
    const early = await waitHealth(ports.SF_HEALTH_PORT, 503, 'while starting');
    assert.equal(started, false, 'the collector finished starting before the FIFO was opened');
    assert.equal(early.type, 'application/json');
    const eb = JSON.parse(early.body);
    assert.equal(eb.status, 'Server not available');
    assert.equal(eb.upSince, '0001-01-01T00:00:00Z');
    assert.equal(eb.uptime, '');
    const again = await health(ports.SF_HEALTH_PORT);
    assert.equal(again.status, 503, 'still starting: still 503');
    readers.push(openReader(fifo1));
    await starting;
    const up = await waitHealth(ports.SF_HEALTH_PORT, 200, 'once started');
    const ub = JSON.parse(up.body);
    assert.equal(ub.status, 'Server available');
    assert.match(ub.upSince, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.match(ub.uptime, /^(\d+ms|[\dhm.]+s)$/);
    assert.equal((await health(ports.SF_HEALTH_PORT, '/other')).status, 404);

    // ---- reloading: the new config's file exporter opens the second FIFO
    fs.writeFileSync(sf.configPath, config(fifo2));
    sf.proc.kill('SIGHUP');
    const mid = await waitHealth(ports.SF_HEALTH_PORT, 503, 'while reloading');
    assert.equal(JSON.parse(mid.body).status, 'Server not available');
    await sleep(200);
    assert.equal((await health(ports.SF_HEALTH_PORT)).status, 503,
      'the reload still waits on the FIFO: still 503');
    readers.push(openReader(fifo2));
    await sf.waitLog(/reloaded: running with/, 'the reload to finish');
    await waitHealth(ports.SF_HEALTH_PORT, 200, 'after the reload');

    // ---- shutting down: a span the otlphttp exporter cannot send keeps it
    // draining for its timeout (3 s) after the receivers have stopped
    const r = await fetch(`http://127.0.0.1:${ports.SF_HTTP_PORT}/v1/traces`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{
        traceId: '0102030405060708090a0b0c0d0e0f10', spanId: '0102030405060708', name: 's',
      }] }] }] }),
    });
    assert.equal(r.status, 200);
    await sf.waitMetrics((m) => (m.get('otelcol_exporter_send_failed_spans', { exporter: 'otlphttp/down' }) ?? 0) === 0 &&
      (m.get('spanfence_exporter_retries', { exporter: 'otlphttp/down' }) ?? 0) > 0,
    'the span to be in the down exporter\'s retries');
    sf.proc.kill('SIGTERM');
    const down = await waitHealth(ports.SF_HEALTH_PORT, 503, 'while shutting down');
    assert.equal(JSON.parse(down.body).status, 'Server not available');
    const res = await sf.exited;
    // the span accepted and never sent is lost work: exit 1, said (issue 24, 9)
    assert.deepEqual(res, { code: 1, signal: null });
    assert.match(sf.stderr(), /stopped, but 1 accepted span could not be exported/);
    assert.equal(await health(ports.SF_HEALTH_PORT), null, 'the endpoint is closed after exit');
  });
});

// upSince is the service's readiness, not the first probe's time: the
// first probe comes a while after the collector is ready (a deliberate
// pause: the quantity under test is elapsed time, no event is waited on),
// and upSince is still the instant of the "running with" log line (the
// state turns RUNNING just before it is logged). After a reload, the new
// service's readiness (issue 37).
test('health_check: upSince and uptime count from readiness, not from the first probe', async () => {
  await harness('health_check', async (h) => {
    const ports = {
      SF_GRPC_PORT: await freePort(),
      SF_HTTP_PORT: await freePort(),
      SF_METRICS_PORT: await freePort(),
      SF_HEALTH_PORT: await freePort(),
      SF_DOWN_PORT: await freePort(),
    };
    const cfg = config(path.join(h.dir, 'out.jsonl'));
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const sf = h.track(new Spanfence({
      dir: h.dir, config: cfg, env, grpcPort: ports.SF_GRPC_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    const stamp = (re) => {
      const line = sf.stderr().split('\n').filter((l) => re.test(l)).pop();
      assert.ok(line, `no log line ${re}`);
      return Date.parse(line.match(/^(\S+Z) /)[1]);
    };
    await sf.start();
    await sf.waitLog(/ running with /, 'readiness');
    const ready = stamp(/ running with /);
    await sleep(1500);
    const first = JSON.parse((await waitHealth(ports.SF_HEALTH_PORT, 200, 'once started')).body);
    const since = Date.parse(first.upSince);
    assert.ok(since <= ready && since > ready - 1000,
      `upSince ${first.upSince} is not the readiness (${new Date(ready).toISOString()})`);
    const up = Number(first.uptime.match(/^([\d.]+)s$/)?.[1]);
    assert.ok(up >= 1.5, `uptime ${first.uptime} counts from the first probe, not from readiness`);

    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload to finish');
    const reloaded = stamp(/reloaded: running with/);
    const after = JSON.parse((await waitHealth(ports.SF_HEALTH_PORT, 200, 'after the reload')).body);
    const since2 = Date.parse(after.upSince);
    assert.ok(since2 > since && since2 <= reloaded,
      `after the reload upSince ${after.upSince} is not the new readiness (${new Date(reloaded).toISOString()})`);
  });
});
