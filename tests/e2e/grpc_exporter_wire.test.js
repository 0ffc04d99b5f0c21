// tests/e2e/grpc_exporter_wire.test.js: the otlp (gRPC) exporter's own
// HTTP/2 transport (libcurl, exporters/otlp_grpc/otlp_grpc.c) against a
// gateway played by node's http2 module, which answers each call as
// scripted, byte by byte, the way no gRPC library would let a test:
//   1. HTTP 503 without grpc-status (a proxy in front of the gateway):
//      UNAVAILABLE, retried;
//   2. a trailers-only UNAVAILABLE (status in the headers, no body):
//      retried, and the next call still gets through;
//   3. OK with the status in trailers: sent. The calls carry gRPC's
//      framing: POST to the Export method, content-type application/grpc,
//      te: trailers, grpc-timeout, grpc-encoding gzip with the compressed
//      flag set, the configured metadata;
//   4. a trailers-only INVALID_ARGUMENT whose grpc-message is
//      percent-encoded: permanent, logged decoded;
//   5. HTTP 404 without grpc-status: UNIMPLEMENTED, permanent.
// All of it on one connection: the exporter's one consumer keeps its h2c
// connection through errors (libcurl 7.88 cannot reuse one made with prior
// knowledge as such: the exporter works around it).
// After each phase /metrics satisfies accepted == sent + send_failed + queued.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const http2 = require('node:http2');
const zlib = require('node:zlib');

const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort } = require('./lib/config');
const peers = require('./lib/peers');

const EXP = { exporter: 'otlp/upstream' };
const RCV = { receiver: 'otlp', transport: 'grpc' };
const METHOD = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

// An h2c gateway: `answers` is consumed one per call (then OK).
function wireGateway() {
  const gw = { calls: [], answers: [], port: 0, sessions: 0 };
  gw.server = http2.createServer();
  gw.server.on('session', () => { gw.sessions++; });
  gw.server.on('stream', (stream, headers) => {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => {
      const body = Buffer.concat(chunks);
      const call = { headers, body, answer: gw.answers.shift() || { grpc: 0 } };
      if (body.length >= 5) {
        call.flag = body[0];
        call.length = body.readUInt32BE(1);
        const msg = body.subarray(5);
        call.message = call.flag === 1 ? zlib.gunzipSync(msg) : msg;
      }
      gw.calls.push(call);
      const a = call.answer;
      if (a.http) {                         // a proxy's answer: no gRPC at all
        stream.respond({ ':status': a.http, 'content-type': 'text/plain' });
        stream.end('not a gRPC server\n');
      } else if (a.grpc !== 0) {            // trailers-only
        const h = { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(a.grpc) };
        if (a.message) h['grpc-message'] = a.message;
        stream.respond(h, { endStream: true });
      } else {                              // headers, an empty reply message, trailers
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(Buffer.from([0, 0, 0, 0, 0]));
      }
    });
  });
  gw.start = () => new Promise((resolve) => gw.server.listen(0, '127.0.0.1', () => {
    gw.port = gw.server.address().port;
    resolve();
  }));
  return gw;
}

function config(port) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC') }) },
    exporters: {
      'otlp/upstream': {
        endpoint: `127.0.0.1:${port}`,
        tls: { insecure: true },
        compression: 'gzip',
        timeout: '3s',
        headers: { 'x-tenant': 'cvm-7' },
        sending_queue: { queue_size: 100, num_consumers: 1, batch: { enabled: false } },
        retry_on_failure: {
          initial_interval: '50ms',
          max_interval: '100ms',
          randomization_factor: 0,
          max_elapsed_time: '60s',
        },
      },
    },
    metricsPort: envPort('METRICS'),
    pipelines: { traces: { receivers: ['otlp'], exporters: ['otlp/upstream'] } },
  });
}

function counts(m) {
  return {
    accepted: m.must('otelcol_receiver_accepted_spans', RCV),
    sent: m.must('otelcol_exporter_sent_spans', EXP),
    failed: m.must('otelcol_exporter_send_failed_spans', EXP),
    permanent: m.must('otelcol_exporter_send_failed_spans', { ...EXP, reason: 'permanent_error' }),
    queued: m.must('spanfence_exporter_queued_spans', EXP),
    retries: m.must('spanfence_exporter_retries', EXP),
  };
}

function assertInvariant(c, phase) {
  assert.equal(c.accepted, c.sent + c.failed + c.queued, `${phase}: accepted == sent + send_failed + queued: ${JSON.stringify(c)}`);
}

test('otlp (gRPC) exporter on HTTP/2: proxy statuses, trailers-only replies, percent-decoded messages', async () => {
  await harness('grpc_exporter_wire', async (h) => {
    const gw = wireGateway();
    await gw.start();
    h.onCleanup(() => new Promise((resolve) => gw.server.close(resolve)));
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config(gw.port),
      env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort) },
      grpcPort,
      metricsPort,
    }));
    await sf.start();
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());

    // ---- 1-3. 503 from a proxy, trailers-only UNAVAILABLE, then OK ----------
    gw.answers.push({ http: 503 }, { grpc: 14, message: 'gateway restarting' });
    let { bytes } = peers.serializedSpans(4, 'wire');
    let r = await client.call(bytes);
    assert.equal(r.code, 0, `export: ${r.code} '${r.details}'`);
    let m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === 4, 'sent == 4');
    let c = counts(m);
    assert.equal(gw.calls.length, 3, 'one call per answer');
    assert.equal(c.retries, 2, 'the 503 and the UNAVAILABLE were each retried once');
    assert.deepEqual({ sent: c.sent, failed: c.failed, queued: c.queued }, { sent: 4, failed: 0, queued: 0 });
    assertInvariant(c, 'phase 1-3');
    for (const call of gw.calls) {
      const hd = call.headers;
      assert.equal(hd[':method'], 'POST');
      assert.equal(hd[':path'], METHOD);
      assert.equal(hd['content-type'], 'application/grpc');
      assert.equal(hd.te, 'trailers');
      assert.equal(hd['grpc-timeout'], '3000m');
      assert.equal(hd['grpc-encoding'], 'gzip');
      assert.equal(hd['x-tenant'], 'cvm-7');
      assert.match(hd['user-agent'], /^spanfence\//);
      assert.equal(call.flag, 1, 'the compressed flag is set');
      assert.equal(call.length, call.body.length - 5, 'the length prefix is the message length');
      assert.ok(call.message.length > 0, 'the gzip message inflates');
    }
    assert.ok(gw.calls[2].message.equals(gw.calls[0].message), 'the retries sent the same message');

    // ---- 4. trailers-only INVALID_ARGUMENT, message percent-encoded ----------
    gw.answers.push({ grpc: 3, message: 'span 100%25 too long %E2%80%94 dropped' });
    ({ bytes } = peers.serializedSpans(2, 'bad'));
    r = await client.call(bytes);
    assert.equal(r.code, 0);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_send_failed_spans', { ...EXP, reason: 'permanent_error' }) === 2,
      'send_failed{permanent_error} == 2');
    await sf.waitLog(/grpc INVALID_ARGUMENT: span 100% too long \u2014 dropped/, 'the decoded grpc-message');
    c = counts(m);
    assert.equal(c.retries, 2, 'a permanent error is not retried');
    assertInvariant(c, 'phase 4');

    // ---- 5. HTTP 404 without grpc-status: UNIMPLEMENTED, permanent -----------
    gw.answers.push({ http: 404 });
    ({ bytes } = peers.serializedSpans(3, 'nf'));
    r = await client.call(bytes);
    assert.equal(r.code, 0);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_send_failed_spans', { ...EXP, reason: 'permanent_error' }) === 5,
      'send_failed{permanent_error} == 5');
    await sf.waitLog(/grpc UNIMPLEMENTED: http 404 without grpc-status/, 'the 404 mapped');
    c = counts(m);
    assert.equal(c.retries, 2);
    assert.equal(gw.calls.length, 5);
    assertInvariant(c, 'phase 5');
    assert.equal(gw.sessions, 1, 'every call on the one kept connection');

    await sf.stop();
  });
});
