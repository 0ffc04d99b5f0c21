// tests/e2e/reload_metrics.test.js: /metrics survives reloads (issue 22).
// Under gRPC load, SIGHUP swaps the exporter four times, a -> b -> a -> b
// (otlphttp/a and otlphttp/b, both to the same gateway): after each reload
// every id's counts carry on (an exporter the new config drops keeps its
// series, marked retired="true", with its final counts; one a config brings
// back goes on from them), and with the load paused, accepted = sent +
// send_failed + queued over every series on /metrics, and the gateway got
// exactly what was sent.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const peers = require('./lib/peers');

function config(id) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC') }) },
    exporters: {
      [`otlphttp/${id}`]: otlphttp(`http://127.0.0.1:${envPort('GATEWAY')}`, { sending_queue: { queue_size: 1000, num_consumers: 2 } }),
    },
    metricsPort: envPort('METRICS'),
    pipelines: { traces: { receivers: ['otlp'], exporters: [`otlphttp/${id}`] } },
  });
}

// The exporter series of `id` now: {sent, failed, queued, retired}.
function exporter(m, id) {
  const s = m.samples.find((x) => x.name === 'otelcol_exporter_sent_spans' && x.labels.exporter === `otlphttp/${id}`);
  if (!s) return null;
  const l = { exporter: `otlphttp/${id}` };
  return { sent: s.value, failed: m.must('otelcol_exporter_send_failed_spans', l),
    queued: m.get('spanfence_exporter_queued_spans', l) || 0, retired: s.labels.retired === 'true' };
}

function balanced(m) {
  const accepted = m.must('otelcol_receiver_accepted_spans');
  const out = m.must('otelcol_exporter_sent_spans') + m.must('otelcol_exporter_send_failed_spans') +
    m.must('spanfence_exporter_queued_spans');
  return { accepted, out, ok: accepted === out && m.must('spanfence_exporter_queued_spans') === 0 };
}

test('reloads a -> b -> a -> b under load: /metrics keeps every id and balances', async (t) => {
  await harness('reload_metrics', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({ dir: h.dir, config: config('a'), grpcPort, metricsPort,
      env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort), SF_GATEWAY_PORT: String(gw.port) } }));
    await sf.start();

    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());
    let running = true;
    let n = 0;
    const load = async () => {
      while (running) {
        const { bytes } = peers.serializedSpans(10, `r${n++}`);
        const r = await client.call(bytes, { timeoutMs: 10000 });
        if (r.code !== peers.status.OK) await sleep(20);
      }
    };
    let loops = [load(), load()];
    h.onCleanup(() => { running = false; return Promise.allSettled(loops); });

    const last = { a: 0, b: 0 };
    const seq = ['b', 'a', 'b'];
    for (let i = 0; i < seq.length; i++) {
      const id = seq[i];
      const other = id === 'a' ? 'b' : 'a';
      await sleep(700);
      fs.writeFileSync(sf.configPath, config(id));
      sf.proc.kill('SIGHUP');
      await sf.waitLog(/reloaded: running with/, `reload ${i + 1} (to ${id})`, { count: i + 1 });
      await sleep(500);
      // Pause the load, let the queue drain, then the books must balance.
      running = false;
      await Promise.all(loops);
      const m = await sf.waitMetrics((x) => balanced(x).ok, `balanced after reload ${i + 1}`, 20000);
      const live = exporter(m, id);
      const gone = exporter(m, other);
      t.diagnostic(`after reload ${i + 1} (to ${id}): ${JSON.stringify(balanced(m))}; ${id} ${JSON.stringify(live)}, ${other} ${JSON.stringify(gone)}`);
      assert.ok(live && !live.retired, `otlphttp/${id} is live`);
      assert.ok(gone && gone.retired, `otlphttp/${other} keeps its series, marked retired`);
      assert.ok(live.sent >= last[id], `otlphttp/${id} carries on from ${last[id]}: ${live.sent}`);
      assert.ok(gone.sent >= last[other], `otlphttp/${other} keeps ${last[other]}: ${gone.sent}`);
      last[id] = live.sent;
      last[other] = gone.sent;
      assert.equal(gw.spans.length, m.must('otelcol_exporter_sent_spans'), 'the gateway got what /metrics says was sent');
      running = true;
      loops = [load(), load()];
    }
    assert.ok(last.a > 0 && last.b > 0, 'both exporters sent');
    running = false;
    await Promise.all(loops);
    await sf.stop();
  });
});
