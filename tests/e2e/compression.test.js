// tests/e2e/compression.test.js: zstd and gzip levels end to end.
// (1) OTLP/HTTP requests compressed with zstd (Debian's zstd CLI, protobuf
//     and JSON) and SDK OTLP/gRPC requests with gzip go in; spanfence sends
//     through otlphttp with zstd (level 3), otlphttp with gzip (level 6) and
//     the otlp (gRPC) exporter with gzip (level 9, compressed by spanfence
//     itself, not gRPC core). Real sinks decode them (the mock gateway with
//     the zstd CLI and zlib, a @grpc/grpc-js server) and hold exactly the
//     allowlisted spans; the wire shows each leg's encoding. Every send
//     works first time (no retry): the exporters' timeouts are 60 s, so a
//     slow machine cannot turn a send into a deadline and a retry.
// (2) Hostile zstd: a bomb stops at max_request_body_size (413), a body
//     refused for its size still has its spans counted, corrupt, truncated
//     and oversized-window frames get 400 with what was wrong, and zstd over
//     gRPC (which gRPC core 1.51 cannot decode) gets UNIMPLEMENTED naming
//     zstd. The collector keeps serving.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const http2 = require('node:http2');
const zlib = require('node:zlib');
const { execFileSync } = require('node:child_process');

const { Gateway, unzstd } = require('./lib/gateway');
const { OtlpGrpcServer } = require('./lib/grpc_server');
const { GrpcTap } = require('./lib/taps');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort, allowlist } = require('./lib/config');
const deps = require('./lib/deps');
const peers = require('./lib/peers');
const senders = require('./lib/senders');
const check = require('./lib/check');
const raw = require('./lib/rawhttp');

const { ProtobufTraceSerializer, JsonTraceSerializer } = deps.transformer();
const KiB = 1024;
const N = 12;
const ZSTD_MAGIC = '28b52ffd';

const zstd = (buf, args = []) =>
  execFileSync('zstd', ['-q', '-c', ...args], { input: buf, maxBuffer: 256 * 1024 * 1024 });

async function collector(h, name, config) {
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const metricsPort = await freePort();
  const sf = h.track(new Spanfence({
    dir: h.dir,
    name,
    config,
    env: { SF_GRPC_PORT: String(grpcPort), SF_HTTP_PORT: String(httpPort), SF_METRICS_PORT: String(metricsPort) },
    grpcPort,
    metricsPort,
  }));
  await sf.start();
  return { sf, grpcPort, httpPort };
}

// An SDK SpanExporter that POSTs OTLP/HTTP (protobuf or JSON) compressed
// with the zstd CLI, as upstream's otlphttp exporter does with zstd.
class ZstdHttpExporter {
  constructor(port, json) {
    this.port = port;
    this.json = json;
    this.sent = [];   // {status, head}
  }

  export(spans, cb) {
    const ser = this.json ? JsonTraceSerializer : ProtobufTraceSerializer;
    const body = zstd(Buffer.from(ser.serializeRequest(spans)), ['-3']);
    const req = http.request({
      host: '127.0.0.1', port: this.port, method: 'POST', path: '/v1/traces',
      headers: {
        'Content-Type': this.json ? 'application/json' : 'application/x-protobuf',
        'Content-Encoding': 'zstd',
        'Content-Length': body.length,
      },
    }, (res) => {
      res.resume();
      res.on('end', () => {
        this.sent.push({ status: res.statusCode, head: body.subarray(0, 4).toString('hex') });
        cb({ code: res.statusCode === 200 ? 0 : 1, error: res.statusCode === 200 ? undefined : new Error(`http ${res.statusCode}`) });
      });
    });
    req.on('error', (e) => cb({ code: 1, error: e }));
    req.end(body);
  }

  shutdown() { return Promise.resolve(); }
  forceFlush() { return Promise.resolve(); }
}

// One raw gRPC call: a 5-byte prefixed message with the given
// grpc-encoding and compressed flag. Resolves {status, message}.
function grpcCall(port, { encoding, flag, message }) {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const prefix = Buffer.alloc(5);
    prefix[0] = flag;
    prefix.writeUInt32BE(message.length, 1);
    const stream = session.request({
      ':method': 'POST', ':path': peers.EXPORT_METHOD, 'content-type': 'application/grpc', te: 'trailers',
      'grpc-encoding': encoding,
    });
    const out = {};
    stream.on('response', (hd) => Object.assign(out, hd));
    stream.on('trailers', (t) => Object.assign(out, t));
    stream.on('data', () => {});
    stream.on('close', () => {
      session.close();
      resolve({ status: Number(out['grpc-status']), message: decodeURIComponent(out['grpc-message'] || '') });
    });
    stream.end(Buffer.concat([prefix, message]));
  });
}

const post = raw.postHead;

function assertStatus(res, what, http, code, messagePart) {
  assert.ok(res.response, `${what}: no response (closed=${res.closed}, error=${res.error})`);
  const body = res.response.body;
  assert.equal(res.response.status, http, `${what}: HTTP status; body ${body.toString('latin1').slice(0, 200)}`);
  let st;
  if (res.response.headers['content-type'] === 'application/json') st = JSON.parse(body.toString('utf8'));
  else st = raw.decodeRpcStatus(body);
  assert.equal(st.code, code, `${what}: status code (message '${st.message}')`);
  if (messagePart) assert.ok(st.message.includes(messagePart), `${what}: message '${st.message}' should say '${messagePart}'`);
}

test('zstd in over OTLP/HTTP; otlphttp zstd, otlphttp gzip level 6 and otlp gzip level 9 out, decoded by real sinks', async () => {
  await harness('compression', async (h) => {
    const gwZ = new Gateway();
    const gwG = new Gateway();
    await gwZ.start();
    await gwG.start();
    h.onCleanup(() => gwZ.stop());
    h.onCleanup(() => gwG.stop());
    const server = new OtlpGrpcServer();
    await server.start();
    h.onCleanup(() => server.stop());
    const upTap = new GrpcTap(server.port);
    await upTap.start();
    h.onCleanup(() => upTap.stop());

    const { sf, grpcPort, httpPort } = await collector(h, 'spanfence', collectorConfig({
      receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP') }) },
      processors: { 'transform/allowlist': allowlist() },
      exporters: {
        'otlphttp/zstd': otlphttp(gwZ.port, {
          compression: 'zstd', compression_params: { level: 3 }, timeout: '60s', retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
        }),
        'otlphttp/gzip6': otlphttp(gwG.port, {
          compression: 'gzip', compression_params: { level: 6 }, timeout: '60s', retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
        }),
        'otlp/gzip9': {
          endpoint: `127.0.0.1:${upTap.port}`, tls: { insecure: true }, compression: 'gzip',
          compression_params: { level: 9 }, timeout: '60s', retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' },
        },
      },
      metricsPort: envPort('METRICS'),
      pipelines: {
        traces: {
          receivers: ['otlp'], processors: ['transform/allowlist'],
          exporters: ['otlphttp/zstd', 'otlphttp/gzip6', 'otlp/gzip9'],
        },
      },
    }));

    const sentAll = [];
    for (const json of [false, true]) {
      const ex = new ZstdHttpExporter(httpPort, json);
      const where = `zstd ${json ? 'json' : 'protobuf'} in`;
      const { sent, results } = await peers.sendSpansThrough(ex, { n: N, batchSize: 5, prefix: `zstd-${json ? 'json' : 'pb'}` });
      assert.deepEqual(results.filter((r) => r.code !== 0), [], `${where}: every request accepted`);
      assert.ok(ex.sent.length >= 1, `${where}: ${ex.sent.length} requests`);
      for (const s of ex.sent) {
        assert.equal(s.status, 200, where);
        assert.equal(s.head, ZSTD_MAGIC, `${where}: the body really was zstd`);
      }
      sentAll.push(...sent);
    }
    {
      const ex = senders.makeExporter('grpc', { grpcPort, compression: 'gzip' });
      const { sent, results } = await senders.sendSpans(ex, { n: N, batchSize: 5, prefix: 'grpc-gzip' });
      assert.deepEqual(results.filter((r) => r.code !== 0), [], 'gRPC gzip in: every call accepted');
      sentAll.push(...sent);
    }
    const total = sentAll.length;
    assert.equal(total, 3 * N);

    await gwZ.waitForSpans(total);
    await gwG.waitForSpans(total);
    await server.waitForSpans(total);
    const m = await sf.waitMetrics((x) => ['otlphttp/zstd', 'otlphttp/gzip6', 'otlp/gzip9']
      .every((exporter) => x.get('otelcol_exporter_sent_spans', { exporter }) === total), `every exporter sent ${total}`);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'http' }), 2 * N);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), N);
    assert.equal(m.must('otelcol_receiver_refused_spans', { receiver: 'otlp' }), 0);
    for (const exporter of ['otlphttp/zstd', 'otlphttp/gzip6', 'otlp/gzip9']) {
      assert.equal(m.must('otelcol_exporter_send_failed_spans', { exporter }), 0, `${exporter} send_failed`);
      assert.equal(m.must('spanfence_exporter_retries', { exporter }), 0, `${exporter} retries`);
    }

    // What crossed the wire, and what the sinks decoded from it.
    for (const r of gwZ.requests) {
      assert.equal(r.status, 200, `zstd gateway answered ${r.status}: ${r.error}`);
      assert.equal(r.headers['content-encoding'], 'zstd');
      assert.equal(r.head, ZSTD_MAGIC, 'otlphttp/zstd body is a zstd frame');
    }
    for (const r of gwG.requests) {
      assert.equal(r.status, 200, `gzip gateway answered ${r.status}: ${r.error}`);
      assert.equal(r.headers['content-encoding'], 'gzip');
      assert.ok(r.head.startsWith('1f8b08'), 'otlphttp/gzip6 body is gzip');
    }
    assert.ok(upTap.calls.length >= 1);
    for (const c of upTap.calls) {
      assert.equal(c.status, 0);
      assert.equal(c.encoding, 'gzip', 'otlp (gRPC) exporter grpc-encoding');
      assert.ok(c.frames.length === 1 && !c.frames[0].truncated, `frames ${JSON.stringify(c.frames)}`);
      assert.equal(c.frames[0].compressed, 1, 'otlp (gRPC) exporter compressed flag');
      assert.ok(c.frames[0].head.startsWith('1f8b08'), `otlp (gRPC) exporter message is one gzip member (${c.frames[0].head})`);
    }
    for (const c of server.calls) assert.equal(c.code, 0, c.error || '');
    check.assertFiltered(sentAll, gwZ.spans, 'otlphttp zstd -> gateway');
    check.assertFiltered(sentAll, gwG.spans, 'otlphttp gzip level 6 -> gateway');
    check.assertFiltered(sentAll, server.spans, 'otlp gzip level 9 -> grpc-js server');
    check.assertSameRecords(gwZ.spans, server.spans, 'zstd and gzip legs carry the same spans');
    await sf.stop();
    assert.equal(sf.exit.code, 0);
  });
});

test('hostile zstd: bomb, refused body counted, corrupt, truncated, window, zstd over gRPC', async () => {
  await harness('compression_hostile', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const limit = 64 * KiB;
    const { sf, grpcPort, httpPort } = await collector(h, 'spanfence', collectorConfig({
      receivers: {
        otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP'),
          httpExtra: { max_request_body_size: '64KiB' } }),
      },
      exporters: { 'otlphttp/gateway': otlphttp(gw.port, { timeout: '60s', retry_on_failure: { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s' } }) },
      metricsPort: envPort('METRICS'),
      pipelines: { traces: { receivers: ['otlp'], exporters: ['otlphttp/gateway'] } },
    }));
    const alive = (what) => assert.equal(sf.exit, null, `spanfence exited after ${what}: ${JSON.stringify(sf.exit)}`);
    const HTTP = { receiver: 'otlp', transport: 'http' };

    // (a) a zstd bomb: 50 MB of zeros in a few KB; 413 once decoding passes
    // the 64 KiB limit.
    const bomb = zstd(Buffer.alloc(50 * 1000 * 1000), ['-19']);
    assert.ok(bomb.length < 8 * KiB, `bomb is ${bomb.length} bytes`);
    let r = await raw.send(httpPort, post('application/x-protobuf', bomb.length, ['Content-Encoding: zstd']), bomb);
    assertStatus(r, 'zstd bomb', 413, 8, 'after decompression');
    r = await raw.send(httpPort, post('application/json', bomb.length, ['Content-Encoding: zstd']), bomb);
    assertStatus(r, 'zstd bomb (json)', 413, 8, 'after decompression');
    alive('zstd bombs');

    // (b) a zstd body larger than the limit itself: refused from its
    // Content-Length, read and dropped, its spans counted as it streams past.
    // Counting decodes at most max_request_body_size of output (as for
    // gzip), so the spans fit in 64 KiB decoded and a skippable frame of
    // padding (RFC 8878 3.1.2) takes the body past the limit.
    const many = peers.serializedSpans(300, 'big');
    assert.ok(many.bytes.length < limit, `test data: ${many.bytes.length} bytes decoded`);
    const pad = Buffer.alloc(8 + limit);
    pad.writeUInt32LE(0x184d2a50, 0);
    pad.writeUInt32LE(limit, 4);
    const bigZ = Buffer.concat([zstd(many.bytes, ['-1']), pad]);
    assert.ok(bigZ.length > limit && bigZ.length < 4 * limit, `test data: ${bigZ.length} bytes of zstd`);
    assert.ok(unzstd(bigZ).equals(many.bytes), 'the zstd CLI decodes the padded body');
    r = await raw.send(httpPort, post('application/x-protobuf', bigZ.length, ['Content-Encoding: zstd']), bigZ);
    assertStatus(r, 'zstd body over the limit', 413, 8);
    let m = await sf.waitMetrics((x) => x.get('otelcol_receiver_refused_spans', { ...HTTP, reason: 'too_large' }) === 300,
      'the 300 spans of the refused zstd body counted');

    // (c) not zstd, truncated, corrupt, a window over 8 MiB: 400 with why.
    const good = peers.serializedSpans(3, 'ok');
    const goodZ = zstd(good.bytes);
    const gz = zlib.gzipSync(good.bytes);
    r = await raw.send(httpPort, post('application/x-protobuf', gz.length, ['Content-Encoding: zstd']), gz);
    assertStatus(r, 'gzip labelled zstd', 400, 3, 'not a zstd frame');
    const cut = goodZ.subarray(0, goodZ.length - 5);
    r = await raw.send(httpPort, post('application/x-protobuf', cut.length, ['Content-Encoding: zstd']), cut);
    assertStatus(r, 'truncated zstd', 400, 3, 'truncated zstd data');
    r = await raw.send(httpPort, post('application/json', cut.length, ['Content-Encoding: zstd']), cut);
    assertStatus(r, 'truncated zstd (json)', 400, 3, 'truncated zstd data');
    const corrupt = Buffer.from(goodZ);
    for (let i = 8; i < corrupt.length - 4; i++) corrupt[i] ^= 0x5a;
    r = await raw.send(httpPort, post('application/x-protobuf', corrupt.length, ['Content-Encoding: zstd']), corrupt);
    assertStatus(r, 'corrupt zstd', 400, 3, 'could not be decompressed');
    const wide = zstd(Buffer.alloc(16 * 1024 * 1024), ['--long=24']);   // from stdin: no content size
    assert.ok(wide.length < limit, `window test body is ${wide.length} bytes`);
    r = await raw.send(httpPort, post('application/x-protobuf', wide.length, ['Content-Encoding: zstd']), wide);
    assertStatus(r, 'zstd window of 16 MiB', 400, 3, 'zstd window larger than 8 MiB');
    alive('bad zstd');

    // (d) zstd over gRPC: core 1.51 cannot decode it; the answer says so.
    const overGrpc = await grpcCall(grpcPort, { encoding: 'zstd', flag: 1, message: goodZ });
    assert.equal(overGrpc.status, 12, `zstd over gRPC: grpc-status ${overGrpc.status} '${overGrpc.message}'`);
    assert.ok(overGrpc.message.includes('zstd'), `zstd over gRPC: '${overGrpc.message}'`);
    // gzip over the same raw client is decoded (the control).
    const gzGrpc = await grpcCall(grpcPort, { encoding: 'gzip', flag: 1, message: gz });
    assert.equal(gzGrpc.status, 0, `gzip over gRPC: grpc-status ${gzGrpc.status} '${gzGrpc.message}'`);

    // (e) still serving: a good zstd request is accepted and delivered.
    r = await raw.send(httpPort, post('application/x-protobuf', goodZ.length, ['Content-Encoding: zstd']), goodZ);
    assert.equal(r.response && r.response.status, 200, 'a good zstd request after all that');
    await gw.waitForSpans(6);
    m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/gateway' }) === 6,
      'the two good requests delivered');
    assert.equal(m.must('otelcol_receiver_accepted_spans', HTTP), 3);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), 3);
    assert.equal(m.must('otelcol_receiver_refused_spans', { ...HTTP, reason: 'too_large' }), 300);
    assert.equal(m.must('spanfence_receiver_refused_requests', { ...HTTP, reason: 'too_large' }), 3,
      'two bombs and the body over the limit');
    assert.equal(m.must('spanfence_receiver_refused_requests', { ...HTTP, reason: 'malformed' }), 5);
    assert.equal(m.must('spanfence_receiver_refused_requests', { receiver: 'otlp', transport: 'grpc', reason: 'malformed' }), 1);
    const ids = new Set(gw.spans.map((s) => s.spanId));
    for (const id of good.spanIds) assert.ok(ids.has(id), `span ${id} delivered`);
    // The gateway got them uncompressed: it had nothing to decode.
    for (const q of gw.requests) assert.equal(q.headers['content-encoding'], undefined);
    assert.ok(unzstd(goodZ).equals(good.bytes), 'the zstd CLI round-trips the test data');
    await sf.stop();
    assert.equal(sf.exit.code, 0);
  });
});
