// tests/e2e/burst_gateway.test.js: configs/cvm.yaml as shipped (only its
// ports moved) behind a gateway that answers each export after 100 ms (one
// across a region) carries an engine-shaped burst in full: 8 connections,
// one call of 100 spans in flight on each, back to back. Every call is
// accepted, every acknowledged span arrives exactly once, the accounting
// holds (accepted = sent + send_failed + queued) and RSS stays under the
// memory limiter's limit. Span ids arrive as cvm.yaml's keyed pseudonyms.
// The burst is sized from the config: its encoded bytes fit the queue
// (sending_queue.queue_size, counted in bytes) whatever the gateway does,
// and it is many times what a queue of 32 requests (the config before)
// holds with its consumers' exports in flight, which refused most of it.
// No time or rate is asserted: the answers' latencies and the exports per
// call are printed as diagnostics (bench/engine.sh measures them).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const peers = require('./lib/peers');

const CONNECTIONS = 8;
const SPANS_PER_CALL = 100;
const GATEWAY_DELAY_MS = 100;
const EXP = { exporter: 'otlphttp/gateway' };
const RCV = { receiver: 'otlp', transport: 'grpc' };
const PSEUDONYM_KEY = 'burst-pseudonym-key-0123456789';

// cvm.yaml's pseudonymize_ids: a span id leaves as HMAC-SHA256(key, 'S' ||
// id), its first 8 bytes (the transform's; all-zero ids stay, none here)
function pseudonymSpanId(hex) {
  return crypto.createHmac('sha256', PSEUDONYM_KEY)
    .update(Buffer.concat([Buffer.from('S'), Buffer.from(hex, 'hex')]))
    .digest().subarray(0, 8).toString('hex');
}

function cvmConfig(grpcPort, httpPort, metricsPort) {
  const file = path.join(process.env.SF_SOURCE_DIR, 'configs', 'cvm.yaml');
  const text = fs.readFileSync(file, 'utf8');
  const moved = text
    .replace('endpoint: 127.0.0.1:4317', `endpoint: 127.0.0.1:${grpcPort}`)
    .replace('endpoint: 127.0.0.1:4318', `endpoint: 127.0.0.1:${httpPort}`)
    .replace('address: 127.0.0.1:8888', `address: 127.0.0.1:${metricsPort}`);
  assert.notEqual(moved, text, 'configs/cvm.yaml: its ports were not found');
  const num = (re, what) => {
    const m = re.exec(text);
    assert.ok(m, `configs/cvm.yaml: no ${what}`);
    return Number(m[1]);
  };
  assert.match(text, /\n {6}sizer: bytes\n/, 'configs/cvm.yaml: the queue is counted in bytes');
  return {
    text: moved,
    queueBytes: num(/\n {6}queue_size: (\d+)\n/, 'sending_queue.queue_size'),
    consumers: num(/\n {6}num_consumers: (\d+)\n/, 'sending_queue.num_consumers'),
    limitMiB: num(/\n {4}limit_mib: (\d+)\n/, 'memory_limiter.limit_mib'),
  };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

test('cvm.yaml carries a burst behind a 100 ms gateway: every call accepted, every span once', async (t) => {
  await harness('burst_gateway', async (h) => {
    const gw = new Gateway();
    gw.replyDelayMs = GATEWAY_DELAY_MS;
    await gw.start();
    h.onCleanup(() => gw.stop());
    const [grpcPort, httpPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const cfg = cvmConfig(grpcPort, httpPort, metricsPort);
    const sf = h.track(new Spanfence({
      dir: h.dir, config: cfg.text, grpcPort, metricsPort,
      env: {
        SPANFENCE_GATEWAY_ENDPOINT: `http://127.0.0.1:${gw.port}`,
        SPANFENCE_GATEWAY_TOKEN: 'burst-token',
        SPANFENCE_PSEUDONYM_KEY: PSEUDONYM_KEY,   // cvm.yaml's declared mode needs one
      },
    }));
    await sf.start();

    // The calls, made before the burst so the burst is as dense as this
    // client can make it: enough that a 32-request queue plus one export in
    // flight per consumer would be 4 times over, and bytes that fit half
    // the queue.
    const oldHeld = 32 + cfg.consumers;
    const perConn = Math.ceil((4 * oldHeld) / CONNECTIONS);
    const calls = [];
    let bytes = 0;
    for (let c = 0; c < CONNECTIONS; c++) {
      calls.push([]);
      for (let i = 0; i < perConn; i++) {
        const r = peers.serializedSpans(SPANS_PER_CALL, `b${c}-${i}`);
        bytes += r.bytes.length;
        calls[c].push(r);
      }
    }
    assert.ok(bytes < cfg.queueBytes / 2, `test data: ${bytes} bytes against a ${cfg.queueBytes}-byte queue`);

    // One connection per client (a local subchannel pool: grpc-js would
    // otherwise share one), one call in flight on each.
    const clients = [];
    for (let c = 0; c < CONNECTIONS; c++) {
      clients.push(new peers.grpc.Client(`127.0.0.1:${grpcPort}`, peers.grpc.credentials.createInsecure(),
        { 'grpc.use_local_subchannel_pool': 1, 'grpc.max_send_message_length': -1 }));
    }
    h.onCleanup(() => clients.forEach((c) => c.close()));
    // Each connection set up by a first call of one span (acknowledged and
    // checked like the rest), so the answers timed are the burst's.
    const warm = [];
    const call = (client, b) => new Promise((resolve) => {
      const start = process.hrtime.bigint();
      client.makeUnaryRequest(peers.EXPORT_METHOD, (x) => x, (x) => x, b, new peers.grpc.Metadata(),
        { deadline: Date.now() + 30000 }, (err) => {
          resolve({ code: err ? err.code : 0, details: err ? err.details : '',
                    ms: Number(process.hrtime.bigint() - start) / 1e6 });
        });
    });
    for (let c = 0; c < CONNECTIONS; c++) {
      const r = peers.serializedSpans(1, `w${c}`);
      warm.push(r);
      assert.equal((await call(clients[c], r.bytes)).code, 0, 'warm-up call');
    }
    const results = await Promise.all(clients.map(async (client, c) => {
      const out = [];
      for (const r of calls[c]) out.push(await call(client, r.bytes));
      return out;
    }));

    const flat = results.flat();
    const refused = flat.filter((r) => r.code !== 0);
    assert.deepEqual(refused.slice(0, 3), [], `${refused.length} of ${flat.length} calls refused`);
    const acked = [...warm, ...calls.flat()].flatMap((r) => r.spanIds);
    const rss = sf.rssKiB();

    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === acked.length,
      `otelcol_exporter_sent_spans == ${acked.length}`, 90000);
    assert.equal(m.must('otelcol_receiver_accepted_spans', RCV), acked.length);
    assert.equal(m.get('otelcol_receiver_refused_spans', { ...RCV, reason: 'queue_full' }) ?? 0, 0);
    assert.equal(m.must('spanfence_exporter_queued_spans', EXP), 0);
    assert.equal(m.must('otelcol_exporter_queue_capacity', EXP), cfg.queueBytes);
    await gw.waitForSpans(acked.length, 30000);
    await sf.stop();

    assert.deepEqual(gw.duplicates(), [], 'a span arrived twice');
    assert.equal(gw.spans.length, acked.length, 'the gateway got exactly the acknowledged spans');
    const got = new Set(gw.spans.map((s) => s.spanId));
    for (const id of acked) {
      assert.ok(got.has(pseudonymSpanId(id)), `acknowledged span ${id} lost`);
      assert.ok(!got.has(id), `span id ${id} left as the client chose it`);
    }
    assert.ok(rss < cfg.limitMiB * 1024, `RSS ${rss} KiB over the limiter's ${cfg.limitMiB} MiB`);

    const ms = flat.map((r) => r.ms).sort((a, b) => a - b);
    t.diagnostic(`${flat.length} calls of ${SPANS_PER_CALL} spans on ${CONNECTIONS} connections, ` +
      `${bytes} bytes; ${gw.requests.length} exports (${(gw.requests.length / flat.length).toFixed(3)} ` +
      `per call); answer ms p50 ${percentile(ms, 50).toFixed(2)} p99 ${percentile(ms, 99).toFixed(2)} ` +
      `max ${ms[ms.length - 1].toFixed(2)} (client side, this client's own load included); RSS ${rss} KiB`);
  });
});
