// tests/e2e/queue_full.test.js: with the gateway down and a 2-batch sending
// queue, spanfence refuses new exports with UNAVAILABLE (retryable) instead of
// growing; its RSS stays bounded; once the gateway is back every accepted span
// arrives and the accounting invariant holds:
//   accepted == sent + send_failed + queued, refused(queue_full) > 0.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Gateway } = require('./lib/gateway');
const { harness, startPipeline } = require('./lib/spanfence');
const peers = require('./lib/peers');

const RSS_BOUND_KIB = 64 * 1024;
const EXP = { exporter: 'otlphttp/gateway' };
const RCV = { receiver: 'otlp', transport: 'grpc' };

function invariant(m) {
  const accepted = m.must('otelcol_receiver_accepted_spans', RCV);
  const sent = m.must('otelcol_exporter_sent_spans', EXP);
  const failed = m.must('otelcol_exporter_send_failed_spans', EXP);
  const queued = m.must('spanfence_exporter_queued_spans', EXP);
  return { accepted, sent, failed, queued };
}

test('full queue refuses with UNAVAILABLE, memory stays bounded, queued spans arrive later', async (t) => {
  await harness('queue_full', async (h) => {
    const gw = new Gateway();
    await gw.start();   // pick the port...
    await gw.stop();    // ...and leave nothing listening on it
    h.onCleanup(() => gw.stop());
    const sf = await startPipeline(h, gw, {
      queueSize: 2,
      numConsumers: 1,
      retry: { initial_interval: '200ms', max_interval: '1s', max_elapsed_time: '300s' },
    });
    const client = new peers.RawClient(sf.grpcPort);
    h.onCleanup(() => client.close());

    // Fill the queue: separate export calls of 10 spans until one is refused.
    const acceptedIds = [];
    let refusedSpans = 0;
    let calls = 0;
    async function fill() {
      for (let tries = 0; tries < 200; tries++) {
        const { bytes, spanIds } = peers.serializedSpans(10, `q${calls++}`);
        const r = await client.call(bytes);
        if (r.code === peers.status.OK) acceptedIds.push(...spanIds);
        else if (r.code === peers.status.UNAVAILABLE) { refusedSpans += spanIds.length; return r; }
        else assert.fail(`export ${calls}: unexpected gRPC status ${r.code} '${r.details}'`);
      }
      return null;
    }
    assert.ok(await fill(), 'no export was refused in 200 calls: the queue is not bounded');
    assert.ok(acceptedIds.length > 0, 'the first exports are accepted while the queue has room');
    // The one consumer may take its batch from the queue after that first
    // refusal (however fast the calls came): wait until it holds one, in
    // retries against the dead gateway (it keeps it for max_elapsed_time),
    // and fill the room it left. From then on the queue cannot shrink.
    await sf.waitMetrics((x) => x.get('spanfence_exporter_retries', EXP) >= 1,
      'the consumer retrying its batch', 60000);
    assert.ok(await fill(), 'the queue took more than 200 calls after its consumer took a batch');

    // While the gateway stays down, every further export is refused; the
    // collector does not buffer them anywhere.
    const big = peers.serializedSpans(200, 'flood');
    for (let i = 0; i < 100; i++) {
      const r = await client.call(big.bytes);
      assert.equal(r.code, peers.status.UNAVAILABLE, `flood export ${i}: status ${r.code} '${r.details}'`);
      refusedSpans += big.spanIds.length;
    }
    const rss = sf.rssKiB();
    assert.ok(rss < RSS_BOUND_KIB, `spanfence RSS ${rss} KiB exceeds ${RSS_BOUND_KIB} KiB with a full queue`);

    t.diagnostic(`accepted ${acceptedIds.length} spans before the first refusal; refused ${refusedSpans}; RSS ${rss} KiB`);

    let m = await sf.metrics();
    let c = invariant(m);
    assert.equal(c.accepted, acceptedIds.length);
    assert.equal(c.sent, 0, 'nothing can be sent while the gateway is down');
    assert.equal(c.accepted, c.sent + c.failed + c.queued, `accounting ${JSON.stringify(c)}`);
    assert.equal(m.must('otelcol_receiver_refused_spans', { ...RCV, reason: 'queue_full' }), refusedSpans);
    assert.ok(refusedSpans > 0);
    assert.equal(m.must('otelcol_exporter_enqueue_failed_spans', EXP), refusedSpans);
    assert.equal(m.must('otelcol_exporter_queue_capacity', EXP), 2);
    assert.ok(m.must('otelcol_exporter_queue_size', EXP) <= 2);

    // Gateway back on the same port: the queued spans drain to it.
    await gw.start();
    await gw.waitForSpans(acceptedIds.length, 60000);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === acceptedIds.length,
      `otelcol_exporter_sent_spans == ${acceptedIds.length}`, 60000);
    c = invariant(m);
    assert.deepEqual(c, { accepted: acceptedIds.length, sent: acceptedIds.length, failed: 0, queued: 0 });
    assert.ok(m.must('otelcol_receiver_refused_spans', { ...RCV, reason: 'queue_full' }) > 0);

    // The collector takes new work again.
    const after = peers.serializedSpans(3, 'after');
    const r = await client.call(after.bytes);
    assert.equal(r.code, peers.status.OK, `export after recovery: ${r.code} '${r.details}'`);
    await gw.waitForSpans(acceptedIds.length + 3, 30000);

    await sf.stop();

    assert.deepEqual(gw.duplicates(), []);
    const got = new Set(gw.spans.map((s) => s.spanId));
    assert.equal(gw.spans.length, acceptedIds.length + 3, 'refused spans never arrive');
    for (const id of [...acceptedIds, ...after.spanIds]) assert.ok(got.has(id), `accepted span ${id} lost`);
  });
});
