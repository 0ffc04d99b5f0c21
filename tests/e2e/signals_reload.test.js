// tests/e2e/signals_reload.test.js: SIGHUP reloads the config under load,
// with the batch processor holding spans for merging:
//  - spans held for merging when the reload comes are delivered by its
//    drain (held for sure: fewer calls than the queue gathers into one
//    request, read from its capacity gauge, and a 1 h timeout, so neither
//    trigger can fire whatever the machine's speed);
//  - a valid new config is swapped in (it adds a file exporter, which then
//    gets spans) and nothing acknowledged to a client is lost or doubled;
//  - an invalid new config is refused with an error and the running one
//    keeps serving;
//  - the counts carry over the reload, so at the end
//    accepted == sent + send_failed + queued and accepted == acknowledged;
//  - SIGUSR1 (counts logged), SIGUSR2 and SIGPIPE do not stop the collector.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort, sleep, waitUntil } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort, allowlist } = require('./lib/config');
const peers = require('./lib/peers');

const EXP = { exporter: 'otlphttp/gateway' };
const RCV = { receiver: 'otlp', transport: 'grpc' };

function config({ filePath = null, invalid = false, timeout = '1h' } = {}) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    processors: {
      batch: { timeout, send_batch_size: 1000000 },
      'transform/allowlist': allowlist({ span: ['gen_ai.request.id'] }),
    },
    exporters: {
      'otlphttp/gateway': otlphttp(`http://127.0.0.1:${envPort('GATEWAY')}`, {
        compression: undefined,     // the exporter's own default
        sending_queue: { queue_size: 1000, num_consumers: 2 },
        retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
      }),
      file: filePath ? { path: filePath } : undefined,
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: {
        receivers: ['otlp'],
        processors: ['transform/allowlist', 'batch'],
        exporters: filePath ? ['otlphttp/gateway', 'file'] : ['otlphttp/gateway'],
        no_such_key: invalid ? 1 : undefined,
      },
    },
  });
}

function counts(m) {
  return {
    accepted: m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp' }),
    sent: m.must('otelcol_exporter_sent_spans', EXP),
    failed: m.must('otelcol_exporter_send_failed_spans', EXP),
    queued: m.must('spanfence_exporter_queued_spans', EXP),
  };
}

test('SIGHUP under load: valid config swapped in, invalid refused, nothing acknowledged lost', async (t) => {
  await harness('signals_reload', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const metricsPort = await freePort();
    const filePath = path.join(h.dir, 'after-reload.jsonl');
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config(),
      env: { SF_GRPC_PORT: String(grpcPort), SF_HTTP_PORT: String(httpPort), SF_METRICS_PORT: String(metricsPort), SF_GATEWAY_PORT: String(gw.port) },
      grpcPort,
      metricsPort,
    }));
    await sf.start();

    // Load: two gRPC clients and one OTLP/HTTP client sending 20-span calls
    // back to back until told to stop. Until `held` is released they start
    // no more than heldCalls calls in all, then wait.
    const m0 = await sf.metrics();
    const capacity = m0.must('otelcol_exporter_queue_capacity', EXP);
    const heldCalls = Math.floor(capacity / 4);
    assert.ok(heldCalls >= 10, `queue capacity ${capacity} leaves room for a load`);
    const acked = [];
    const notAcked = {};
    let stop = false;
    let n = 0;
    let started = 0;
    let inFlight = 0;
    let release;
    const held = new Promise((resolve) => { release = resolve; });
    let holding = true;
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => { stop = true; release(); client.close(); });
    // One call of a loop: waits at the gate while holding, then sends.
    const next = async () => {
      if (holding && started >= heldCalls) await held;
      started++;
      inFlight++;
      return peers.serializedSpans(20, `r${n++}`);
    };
    const loop = async () => {
      while (!stop) {
        const { bytes, spanIds } = await next();
        let r;
        try {
          r = await client.call(bytes, { timeoutMs: 10000 });
        } catch (e) {
          if (stop) return;
          throw e;
        } finally {
          inFlight--;
        }
        if (r.code === peers.status.OK) acked.push(...spanIds);
        else {
          notAcked[r.code] = (notAcked[r.code] || 0) + 1;
          await sleep(20);
        }
      }
    };
    const httpLoop = async () => {
      while (!stop) {
        const { bytes, spanIds } = await next();
        let status;
        try {
          const r = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
            method: 'POST', headers: { 'Content-Type': 'application/x-protobuf' }, body: bytes,
            signal: AbortSignal.timeout(10000),
          });
          await r.arrayBuffer();
          status = r.status;
        } catch (e) {
          status = `http ${e.cause ? e.cause.code || e.cause.message : e.name}`;
        } finally {
          inFlight--;
        }
        if (status === 200) acked.push(...spanIds);
        else {
          notAcked[status] = (notAcked[status] || 0) + 1;
          await sleep(20);
        }
      }
    };
    const loops = [loop(), loop(), httpLoop()];
    h.onCleanup(() => { stop = true; release(); return Promise.allSettled(loops); });

    // Every held call answered: what was acknowledged is queued, unsent.
    const quiet = await sf.waitMetrics((x) => started >= heldCalls && inFlight === 0
      && x.get('otelcol_receiver_accepted_spans', { receiver: 'otlp' }) === acked.length,
      `the first ${heldCalls} calls answered`);
    const beforeReload = acked.length;
    assert.ok(beforeReload > 0, `load is flowing before the reload (${JSON.stringify(notAcked)})`);
    assert.equal(quiet.must('spanfence_exporter_queued_spans', EXP), beforeReload,
      'spans are held for merging before the reload');
    assert.equal(gw.spans.length, 0, 'spans are held for merging before the reload');

    // A valid new config, sent while the load flows again: adds a file exporter.
    holding = false;
    release();
    fs.writeFileSync(sf.configPath, config({ filePath }));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload');
    // What was acknowledged before the reload was delivered by the drain.
    await gw.waitForSpans(beforeReload, 20000);

    // Other signals are not fatal.
    for (const sig of ['SIGUSR1', 'SIGUSR2', 'SIGPIPE']) sf.proc.kill(sig);
    await sf.waitLog(/received SIGUSR1: spans accepted \d+/, 'the SIGUSR1 counts line');
    await sf.waitLog(/received SIGUSR2: ignored/, 'the SIGUSR2 line');

    // An invalid one: refused, the running config keeps going.
    fs.writeFileSync(sf.configPath, config({ filePath, invalid: true }));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reload: .* is not valid \(see above\); still running the previous configuration/, 'the refused reload');
    const atRefusal = acked.length;
    await waitUntil(() => acked.length > atRefusal, 'a call acknowledged after the invalid config was refused');

    // And a valid reload once more, back to the first config's exporters,
    // whose short batch timeout lets what comes after it leave on its own.
    fs.writeFileSync(sf.configPath, config({ timeout: '200ms' }));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the second reload', { count: 2 });
    const atLastReload = acked.length;
    await waitUntil(() => acked.length > atLastReload, 'a call acknowledged after the last reload');

    stop = true;
    await Promise.all(loops);
    assert.equal(sf.exit, null, `spanfence exited: ${JSON.stringify(sf.exit)}`);

    // Everything acknowledged arrives: merged batches wait out the 200 ms timeout.
    await gw.waitForSpans(acked.length, 30000);
    const m = await sf.waitMetrics((x) => x.get('spanfence_exporter_queued_spans', EXP) === 0,
      'queued spans back to 0', 30000);
    const c = counts(m);
    t.diagnostic(`acknowledged ${acked.length} spans (not acknowledged: ${JSON.stringify(notAcked)}); ${JSON.stringify(c)}`);
    // A call cut while the receivers restart (gRPC CANCELLED, HTTP socket
    // closed) may have been accepted before its answer was lost: those may
    // be counted accepted (and delivered) without an acknowledgement. Calls
    // refused outright (UNAVAILABLE, connection refused) never are.
    const cut = (notAcked[peers.status.CANCELLED] || 0) + (notAcked['http UND_ERR_SOCKET'] || 0);
    assert.ok(c.accepted >= acked.length, `accepted ${c.accepted} < acknowledged ${acked.length}`);
    assert.ok(c.accepted - acked.length <= 20 * cut,
      `accepted ${c.accepted} - acknowledged ${acked.length} exceeds the ${cut} calls cut mid-way`);
    assert.equal(c.accepted, c.sent + c.failed + c.queued, `accounting ${JSON.stringify(c)}`);
    assert.deepEqual({ failed: c.failed, queued: c.queued, sent: c.sent }, { failed: 0, queued: 0, sent: c.accepted });
    assert.ok(m.must('spanfence_receiver_requests', RCV) > 0);
    assert.ok(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'http' }) > 0);

    const got = new Set(gw.spans.map((s) => s.spanId));
    for (const id of acked) assert.ok(got.has(id), `acknowledged span ${id} lost`);
    assert.deepEqual(gw.duplicates(), [], 'no span delivered twice');
    assert.equal(gw.spans.length, c.accepted, 'the gateway got exactly what was accepted');

    // The file exporter ran while the second config did.
    const lines = fs.readFileSync(filePath, 'utf8').split('\n').filter(Boolean);
    assert.ok(lines.length > 0, 'the new config\'s file exporter got spans');

    await sf.stop();
    assert.match(sf.stderr(), /unknown key 'no_such_key'/);
  });
});

test('SIGHUP with the gateway down: batches not sent yet go to the new config\'s exporter, none dropped', async (t) => {
  await harness('signals_reload_down', async (h) => {
    const gw = new Gateway();
    await gw.start();
    await gw.stop();   // down: the port is known, nothing listens
    h.onCleanup(() => gw.stop());
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config({ timeout: '5s' }),
      env: { SF_GRPC_PORT: String(grpcPort), SF_HTTP_PORT: String(httpPort), SF_METRICS_PORT: String(metricsPort), SF_GATEWAY_PORT: String(gw.port) },
      grpcPort,
      metricsPort,
    }));
    await sf.start();
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());
    const acked = [];
    for (let i = 0; i < 30; i++) {
      const { bytes, spanIds } = peers.serializedSpans(10, `d${i}`);
      const r = await client.call(bytes);
      assert.equal(r.code, peers.status.OK, `call ${i}: ${r.code} ${r.details}`);
      acked.push(...spanIds);
    }
    // Some are in a retry (merged after the 5 s timeout or not), some queued.
    fs.writeFileSync(sf.configPath, config({ timeout: '5s' }));
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload');
    let m = await sf.metrics();
    let c = counts(m);
    assert.equal(c.accepted, acked.length);
    assert.equal(c.failed, 0, 'nothing dropped at the reload');
    assert.equal(c.queued, acked.length, 'every span kept, queued in the new exporter');

    await gw.start();
    await gw.waitForSpans(acked.length, 30000);
    m = await sf.waitMetrics((x) => x.get('spanfence_exporter_queued_spans', EXP) === 0, 'queue drained', 30000);
    c = counts(m);
    t.diagnostic(JSON.stringify(c));
    assert.deepEqual(c, { accepted: acked.length, sent: acked.length, failed: 0, queued: 0 });
    const got = new Set(gw.spans.map((s) => s.spanId));
    for (const id of acked) assert.ok(got.has(id), `acknowledged span ${id} lost`);
    assert.deepEqual(gw.duplicates(), []);
    await sf.stop();
  });
});
