// tests/e2e/health_pipeline.test.js: health_check's check_collector_pipeline
// (upstream's legacy keys), against a gateway that starts failing and then
// recovers. Two health_check extensions: health_check/pipeline with the
// check enabled (interval 5s, exporter_failure_threshold 3) and
// health_check/plain without it, as a control:
//  - healthy while the gateway takes the spans: both answer 200;
//    (the retries come every 50-100 ms: 3 of them fit in the 5 s interval
//    fifteen times over; at 1 s a starved machine could space them past it)
//  - the gateway answers 503: the exporter's retries fail, and after 3
//    failed sends health_check/pipeline answers 503 with upstream's JSON
//    and an "error" naming the exporter and its last failure (http 503),
//    while health_check/plain still answers 200;
//  - the gateway answers 200 again: the retried spans are sent (none
//    lost), and once no failure is left within the interval,
//    health_check/pipeline answers 200 again.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver } = require('./lib/config');
const { Gateway } = require('./lib/gateway');
const peers = require('./lib/peers');

async function health(port) {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/`);
    return { status: r.status, body: await r.text() };
  } catch (_) {
    return null;
  }
}

// Poll until `pred(answer)` holds (bounded), returning that answer.
async function waitHealth(port, pred, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  let last = null;
  while (Date.now() < deadline) {
    last = await health(port);
    if (last && pred(last)) return last;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}; last answer ${JSON.stringify(last)}`);
}

test('health_check check_collector_pipeline: 503 while an exporter keeps failing, 200 after it recovers', async () => {
  await harness('health_pipeline', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const pipePort = await freePort();
    const plainPort = await freePort();
    const config = collectorConfig({
      receivers: { otlp: otlpReceiver({ grpc: grpcPort }) },
      exporters: {
        'otlphttp/gw': {
          endpoint: gw.url,
          retry_on_failure: { initial_interval: '50ms', max_interval: '100ms', max_elapsed_time: '120s' },
        },
      },
      extensions: {
        'health_check/pipeline': {
          endpoint: `127.0.0.1:${pipePort}`,
          check_collector_pipeline: { enabled: true, interval: '5s', exporter_failure_threshold: 3 },
        },
        'health_check/plain': { endpoint: `127.0.0.1:${plainPort}` },
      },
      serviceExtensions: ['health_check/pipeline', 'health_check/plain'],
      metricsPort,
      pipelines: { traces: { receivers: ['otlp'], exporters: ['otlphttp/gw'] } },
    });
    const sf = h.track(new Spanfence({ dir: h.dir, config, grpcPort, metricsPort }));
    await sf.start();

    // healthy, and still healthy after spans went through
    await waitHealth(pipePort, (a) => a.status === 200, 'healthy at start');
    let r = await peers.sendSdkSpans({ port: grpcPort, n: 10, batchSize: 10, prefix: 'ok' });
    assert.ok(r.results.every((x) => x.code === 0));
    await gw.waitFor(() => gw.spans.length === 10, '10 spans at the gateway');
    let a = await health(pipePort);
    assert.equal(a.status, 200, `healthy while sending works: ${a.body}`);
    assert.equal(JSON.parse(a.body).status, 'Server available');

    // the gateway fails: unhealthy once 3 sends failed within the interval
    gw.setStatus(503);
    r = await peers.sendSdkSpans({ port: grpcPort, n: 10, batchSize: 10, prefix: 'fail' });
    assert.ok(r.results.every((x) => x.code === 0), 'the client is answered: the spans are queued');
    a = await waitHealth(pipePort, (x) => x.status === 503, 'unhealthy while the gateway fails');
    const body = JSON.parse(a.body);
    assert.equal(body.status, 'Server not available');
    assert.match(body.error, /^exporter 'otlphttp\/gw': \d+ failed sends in the last 5s; the last: http 503$/);
    assert.ok(Number(/: (\d+) failed/.exec(body.error)[1]) >= 3, body.error);
    const plain = await health(plainPort);
    assert.equal(plain.status, 200, 'without check_collector_pipeline the collector stays healthy');
    assert.ok(gw.requests.filter((q) => q.status === 503).length >= 3, 'the gateway refused at least 3 sends');
    assert.match(sf.stderr(), /health_check: unhealthy: exporter 'otlphttp\/gw'/);

    // the gateway recovers: the spans are sent, and health follows
    gw.setStatus(200);
    await gw.waitFor(() => gw.spans.length === 20, 'the retried spans at the gateway');
    a = await waitHealth(pipePort, (x) => x.status === 200, 'healthy again after the gateway recovered');
    assert.equal(JSON.parse(a.body).status, 'Server available');
    const m = await sf.metrics();
    assert.equal(m.must('otelcol_exporter_sent_spans', { exporter: 'otlphttp/gw' }), 20, 'no span lost');
    await sf.stop();
    await sleep(0);
  });
});
