// tests/e2e/http_bad_input.test.js: broken and hostile OTLP/HTTP requests,
// sent as raw bytes: truncated protobuf, a body shorter than its
// Content-Length, wrong content types, invalid JSON, a gzip bomb, an
// oversized body, 100 KB of headers, wrong methods, paths and encodings.
// Each gets its specific status (and a google.rpc.Status body where the spec
// says so); afterwards spanfence still serves HTTP and gRPC, /metrics shows
// the refusals, and everything it accepted was sent.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const zlib = require('node:zlib');

const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort, allowlist } = require('./lib/config');
const peers = require('./lib/peers');
const senders = require('./lib/senders');
const raw = require('./lib/rawhttp');

const MiB = 1024 * 1024;
const EXP = { exporter: 'otlphttp/gateway' };

function config(gatewayPort) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
    processors: { 'transform/allowlist': allowlist() },
    exporters: {
      // the exporter's own default compression
      'otlphttp/gateway': otlphttp(gatewayPort, {
        compression: undefined,
        sending_queue: { queue_size: 32, num_consumers: 2 },
        retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
      }),
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], processors: ['transform/allowlist'], exporters: ['otlphttp/gateway'] },
    },
  });
}

const post = raw.postHead;

function assertProtoStatus(res, what, http, code) {
  assert.ok(res.response, `${what}: no response (closed=${res.closed}, error=${res.error})`);
  assert.equal(res.response.status, http, `${what}: HTTP status; body ${res.response.body.toString('latin1').slice(0, 200)}`);
  assert.equal(res.response.headers['content-type'], 'application/x-protobuf', `${what}: content-type`);
  const st = raw.decodeRpcStatus(res.response.body);
  assert.equal(st.code, code, `${what}: google.rpc.Status.code (message '${st.message}')`);
  assert.ok(st.message.length > 0, `${what}: google.rpc.Status.message is empty`);
  return st;
}

function assertJsonStatus(res, what, http, code) {
  assert.ok(res.response, `${what}: no response (closed=${res.closed}, error=${res.error})`);
  assert.equal(res.response.status, http, `${what}: HTTP status`);
  assert.equal(res.response.headers['content-type'], 'application/json', `${what}: content-type`);
  const text = res.response.body.toString('utf8');
  let st;
  assert.doesNotThrow(() => { st = JSON.parse(text); }, `${what}: response body is not valid JSON: ${text}`);
  assert.equal(st.code, code, `${what}: status code in ${text}`);
  assert.equal(typeof st.message, 'string');
  assert.ok(st.message.length > 0, `${what}: empty message`);
  return st;
}

async function startCollector(h, name) {
  const gw = new Gateway();
  await gw.start();
  h.onCleanup(() => gw.stop());
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const metricsPort = await freePort();
  const sf = h.track(new Spanfence({
    dir: h.dir,
    name,
    config: config(gw.port),
    env: { SF_GRPC_PORT: String(grpcPort), SF_HTTP_PORT: String(httpPort), SF_METRICS_PORT: String(metricsPort) },
    grpcPort,
    metricsPort,
  }));
  await sf.start();
  return { gw, sf, grpcPort, httpPort };
}

// A chunked request (no Content-Length) of `body`, in 1 MiB chunks.
function chunkedRequest(body) {
  const head = ['POST /v1/traces HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/x-protobuf',
    'Transfer-Encoding: chunked'].join('\r\n');
  const parts = [];
  for (let off = 0; off < body.length; off += MiB) {
    const c = body.subarray(off, off + MiB);
    parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return { head, body: Buffer.concat(parts) };
}

test('broken OTLP/HTTP input gets clear statuses; the collector keeps serving and loses nothing', async () => {
  await harness('http_bad_input', async (h) => {
    const { gw, sf, grpcPort, httpPort } = await startCollector(h, 'spanfence');
    const alive = (what) => assert.equal(sf.exit, null, `spanfence exited after ${what}: ${JSON.stringify(sf.exit)}`);
    let refusedRequests = 0;   // requests that reach the trace path with POST and are refused

    const good = peers.serializedSpans(3, 'bad-http');

    // (a) a truncated protobuf body: 400 + google.rpc.Status{code: 3 INVALID_ARGUMENT}.
    const trunc = good.bytes.subarray(0, good.bytes.length - 3);
    let r = await raw.send(httpPort, post('application/x-protobuf', trunc.length), trunc);
    assertProtoStatus(r, 'truncated protobuf', 400, 3);
    refusedRequests++;
    // ...and a gzip body whose inflated bytes are truncated protobuf.
    const gzTrunc = zlib.gzipSync(trunc);
    r = await raw.send(httpPort, post('application/x-protobuf', gzTrunc.length, ['Content-Encoding: gzip']), gzTrunc);
    assertProtoStatus(r, 'gzip of truncated protobuf', 400, 3);
    refusedRequests++;
    // ...and a gzip body that is not gzip at all.
    r = await raw.send(httpPort, post('application/x-protobuf', good.bytes.length, ['Content-Encoding: gzip']), good.bytes);
    assertProtoStatus(r, 'Content-Encoding gzip on a plain body', 400, 3);
    refusedRequests++;

    // (b) a body shorter than its Content-Length, then the client goes away
    // (half-close, then a hard close): no answer owed, no crash.
    r = await raw.send(httpPort, post('application/x-protobuf', 1000), good.bytes.subarray(0, 100), { end: true, timeoutMs: 5000 });
    assert.ok(!r.response || r.response.status >= 400, `truncated upload answered ${r.response && r.response.status}`);
    r = await raw.send(httpPort, post('application/x-protobuf', 1000), good.bytes.subarray(0, 100), { timeoutMs: 300 });
    assert.equal(r.response, null, 'nothing to answer to an upload still in progress');
    alive('truncated uploads');

    // (c) wrong or missing content type: 415.
    for (const ct of ['text/plain', 'application/grpc', 'application/protobuf', null]) {
      r = await raw.send(httpPort, post(ct, good.bytes.length), good.bytes);
      assert.ok(r.response, `content-type ${ct}: no response`);
      assert.equal(r.response.status, 415, `content-type ${ct}`);
      refusedRequests++;
    }

    // (d) invalid JSON: 400 + {"code": 3, "message": ...}, itself valid JSON.
    const badJson = [
      '{"resourceSpans": [',
      'not json at all',
      '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not hex \\" quoted", "spanId": "00"}]}]}]}',
      '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}',
      '{"resourceSpans": {"unexpected": "object"}}',
    ];
    for (const body of badJson) {
      const b = Buffer.from(body);
      r = await raw.send(httpPort, post('application/json', b.length), b);
      assertJsonStatus(r, `invalid JSON ${body}`, 400, 3);
      refusedRequests++;
    }

    // (e) a gzip bomb: 50 MB of zeros in ~50 KB; 413 once inflating passes
    // max_request_body_size (20 MiB), before the whole bomb is inflated.
    const bomb = zlib.gzipSync(Buffer.alloc(50 * 1000 * 1000), { level: 9 });
    assert.ok(bomb.length < 100 * 1024, `bomb is ${bomb.length} bytes`);
    r = await raw.send(httpPort, post('application/x-protobuf', bomb.length, ['Content-Encoding: gzip']), bomb);
    assertProtoStatus(r, 'gzip bomb', 413, 8);
    refusedRequests++;
    // The same bomb as deflate, with a JSON content type: 413 in JSON.
    const dbomb = zlib.deflateSync(Buffer.alloc(50 * 1000 * 1000), { level: 9 });
    r = await raw.send(httpPort, post('application/json', dbomb.length, ['Content-Encoding: deflate']), dbomb);
    assertJsonStatus(r, 'deflate bomb (json)', 413, 8);
    refusedRequests++;
    alive('gzip bombs');

    // (f) an oversized plain body, refused from its Content-Length. The
    // client waits a moment for an early answer before streaming the body
    // (as curl does): spanfence answers 413 from the headers and closes
    // without reading the body, so a client that streams at once (node's
    // http, the SDK's exporters) sees EPIPE/ECONNRESET instead of the 413.
    // The chunked case is the next test.
    const big = Buffer.alloc(21 * MiB, 0x0a);
    r = await raw.send(httpPort, post('application/x-protobuf', big.length), big, { earlyMs: 1000 });
    assertProtoStatus(r, '21 MiB body with Content-Length', 413, 8);
    refusedRequests++;
    alive('oversized bodies');

    // (g) 100 KB of headers: a 4xx, and the connection is closed.
    const hugeHead = post('application/x-protobuf', good.bytes.length, [`X-Huge: ${'a'.repeat(100 * 1024)}`]);
    r = await raw.send(httpPort, hugeHead, good.bytes, { waitCloseMs: 5000 });
    assert.ok(r.response, `100 KB header: no response (closed=${r.closed}, error=${r.error})`);
    assert.ok([431, 413].includes(r.response.status), `100 KB header: status ${r.response.status}, want 431 or 413`);
    assert.equal(r.closed, true, '100 KB header: connection left open');
    // Many headers adding up to 100 KB.
    const manyHead = post('application/x-protobuf', good.bytes.length,
      Array.from({ length: 1000 }, (_, i) => `X-H${i}: ${'b'.repeat(100)}`));
    r = await raw.send(httpPort, manyHead, good.bytes, { waitCloseMs: 5000 });
    assert.ok(r.response && [431, 413].includes(r.response.status), `1000 headers: ${r.response && r.response.status}`);
    assert.equal(r.closed, true, '1000 headers: connection left open');
    alive('huge headers');

    // (h) wrong method, path, encoding.
    r = await raw.send(httpPort, 'GET /v1/traces HTTP/1.1\r\nHost: 127.0.0.1');
    assert.equal(r.response && r.response.status, 405, 'GET /v1/traces');
    r = await raw.send(httpPort, ['PUT /v1/traces HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/x-protobuf',
      `Content-Length: ${good.bytes.length}`].join('\r\n'), good.bytes);
    assert.equal(r.response && r.response.status, 405, 'PUT /v1/traces');
    for (const p of ['/v1/metrics', '/v1/logs', '/', '/v1/traces/']) {
      r = await raw.send(httpPort, post('application/x-protobuf', good.bytes.length).replace('/v1/traces', p), good.bytes);
      assert.equal(r.response && r.response.status, 404, `POST ${p}`);
    }
    // zstd is decoded now (tests/e2e/compression.test.js); stacked codings are not.
    for (const enc of ['br', 'compress', 'zstd, gzip', 'gzip, br']) {
      r = await raw.send(httpPort, post('application/x-protobuf', good.bytes.length, [`Content-Encoding: ${enc}`]), good.bytes);
      assertProtoStatus(r, `Content-Encoding ${enc}`, 415, 3);
      refusedRequests++;
    }
    alive('wrong methods, paths and encodings');

    // Nothing refused reached the gateway.
    let m = await sf.metrics();
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'http' }), 0);
    assert.equal(m.must('spanfence_receiver_requests', { receiver: 'otlp', transport: 'http' }), refusedRequests,
      'every refused POST to the trace path is counted as a request');
    assert.equal(gw.spans.length, 0);

    // After all that: a normal export over HTTP (the SDK's protobuf exporter)
    // and over gRPC both go through.
    const exporter = senders.makeExporter('http-protobuf', { httpPort, compression: 'gzip' });
    const viaHttp = await senders.sendSpans(exporter, { n: 7, batchSize: 7, prefix: 'after-http' });
    assert.deepEqual(viaHttp.results.filter((x) => x.code !== 0), [], 'HTTP export after bad input');
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());
    const g = await client.call(good.bytes);
    assert.equal(g.code, 0, `gRPC export after bad input: ${g.code} '${g.details}'`);

    await gw.waitForSpans(10);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', EXP) === 10, 'sent == 10');
    const accepted = m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp' });
    assert.equal(accepted, 10);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'http' }), 7);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), 3);
    assert.equal(m.must('otelcol_exporter_sent_spans', EXP), accepted, 'nothing accepted is lost');
    assert.equal(m.must('otelcol_exporter_send_failed_spans', EXP), 0);
    assert.equal(m.must('spanfence_exporter_queued_spans', EXP), 0);
    assert.equal(m.must('spanfence_receiver_requests', { receiver: 'otlp', transport: 'http' }), refusedRequests + 1);
    alive('the normal exports');

    await sf.stop();
    assert.deepEqual(gw.duplicates(), []);
    const ids = new Set(gw.spans.map((s) => s.spanId));
    for (const s of viaHttp.sent) assert.ok(ids.has(s.spanContext().spanId), `HTTP span '${s.name}' lost`);
    for (const id of good.spanIds) assert.ok(ids.has(id), `gRPC span ${id} lost`);
    assert.equal(gw.spans.length, 10);
  });
});

test('a chunked body over max_request_body_size gets 413', async () => {
  await harness('http_bad_input_chunked', async (h) => {
    const { gw, sf, httpPort } = await startCollector(h, 'spanfence-chunked');
    const alive = (what) => assert.equal(sf.exit, null, `spanfence exited after ${what}: ${JSON.stringify(sf.exit)}`);

    // Control: a chunked request under the limit is taken.
    const good = peers.serializedSpans(4, 'chunked');
    let req = chunkedRequest(good.bytes);
    let r = await raw.send(httpPort, req.head, req.body);
    assert.equal(r.response && r.response.status, 200, `small chunked request: ${JSON.stringify(r.response && r.response.status)} ${r.error}`);
    await gw.waitForSpans(4);

    // 21 MiB chunked: the limit is passed mid-upload.
    req = chunkedRequest(Buffer.alloc(21 * MiB, 0x0a));
    r = await raw.send(httpPort, req.head, req.body);
    alive('a 21 MiB chunked body');
    const m = await sf.metrics();
    assert.equal(m.must('otelcol_receiver_refused_spans', { receiver: 'otlp', transport: 'http', reason: 'too_large' }), 0);
    assert.equal(m.must('spanfence_receiver_requests', { receiver: 'otlp', transport: 'http' }), 2,
      'the oversized chunked request is counted');
    assert.equal(m.must('spanfence_receiver_refused_requests', { receiver: 'otlp', transport: 'http', reason: 'too_large' }), 1,
      'and counted as refused for its size');
    // The limit is crossed while the body is still arriving: spanfence
    // reads and discards the rest and answers 413 when the upload ends
    // (libmicrohttpd takes no response mid-upload).
    assertProtoStatus(r, '21 MiB chunked body', 413, 8);

    await sf.stop();
    assert.equal(gw.spans.length, 4);
  });
});
