// tests/e2e/bad_input.test.js: hostile or broken gRPC input, sent raw with
// @grpc/grpc-js: garbage bytes, an over-size message, 5,000-deep nested
// ArrayValues (which would overflow protobuf-c's recursive unpack) and an
// unknown method. Each gets its specific status, and the collector keeps
// serving normal exports afterwards.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Gateway } = require('./lib/gateway');
const { harness, startPipeline } = require('./lib/spanfence');
const peers = require('./lib/peers');
const proto = require('./lib/proto');

const { lenField, varintField } = proto;
const S = peers.status;

// ExportTraceServiceRequest{resource_spans{scope_spans{spans{ids, name,
// attributes: [{key: "deep", value: [[[...[1]...]]]}]}}}}, by hand.
function deepRequest(depth) {
  let any = varintField(3, 1);                          // AnyValue.int_value = 1
  for (let i = 0; i < depth; i++) any = lenField(5, lenField(1, any)); // AnyValue.array_value{values: [any]}
  const kv = Buffer.concat([lenField(1, 'deep'), lenField(2, any)]);
  const span = Buffer.concat([
    lenField(1, Buffer.alloc(16, 0xab)), lenField(2, Buffer.alloc(8, 0xcd)),
    lenField(5, 'deep-span'), lenField(9, kv),
  ]);
  return lenField(1, lenField(2, lenField(2, span)));
}

// A well-formed request whose one span carries a `bytes`-long attribute.
function bigRequest(bytes) {
  const kv = Buffer.concat([lenField(1, 'gen_ai.prompt'), lenField(2, lenField(1, Buffer.alloc(bytes, 0x61)))]);
  const span = Buffer.concat([
    lenField(1, Buffer.alloc(16, 0x01)), lenField(2, Buffer.alloc(8, 0x02)), lenField(5, 'big'), lenField(9, kv),
  ]);
  return lenField(1, lenField(2, lenField(2, span)));
}

test('hand encoder builds what it claims (checked by the independent decoder)', () => {
  const req = proto.decodeRequest(deepRequest(3));
  const s = req.resourceSpans[0].scopeSpans[0].spans[0];
  assert.equal(s.name, 'deep-span');
  let v = s.attributes[0].value;
  let levels = 0;
  while (v.value === 'arrayValue') { v = v.arrayValue.values[0]; levels++; }
  assert.equal(levels, 3);
  assert.equal(proto.u64(v.intValue, true), '1');
  const big = proto.decodeRequest(bigRequest(1000));
  assert.equal(big.resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.stringValue.length, 1000);
});

test('garbage, over-size, too deep and unknown methods are refused; normal exports still work', async () => {
  await harness('bad_input', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const sf = await startPipeline(h, gw);
    const client = new peers.RawClient(sf.grpcPort);
    h.onCleanup(() => client.close());

    // (a) garbage: wire type 7 does not exist; text bytes start an end-group.
    for (const junk of [Buffer.from([0x0f, 0xff, 0xff, 0xff]), Buffer.from('this is not a protobuf message')]) {
      const r = await client.call(junk);
      assert.equal(r.code, S.INVALID_ARGUMENT, `garbage ${junk.toString('hex').slice(0, 16)}: ${r.code} '${r.details}'`);
    }
    // A truncated but otherwise real request.
    const real = peers.serializedSpans(2, 'trunc').bytes;
    let r = await client.call(real.subarray(0, real.length - 3));
    assert.equal(r.code, S.INVALID_ARGUMENT, `truncated: ${r.code} '${r.details}'`);

    // (b) over max_recv_msg_size_mib (4 MiB default).
    r = await client.call(bigRequest(5 * 1024 * 1024));
    assert.equal(r.code, S.RESOURCE_EXHAUSTED, `5 MiB request: ${r.code} '${r.details}'`);

    // (c) 5,000 levels of nested ArrayValue: refused, and the process lives.
    const deep = deepRequest(5000);
    assert.ok(deep.length < 64 * 1024, `deep request is ${deep.length} bytes`);
    r = await client.call(deep);
    assert.equal(r.code, S.INVALID_ARGUMENT, `5000-deep: ${r.code} '${r.details}'`);
    assert.equal(sf.exit, null, 'spanfence died on deep nesting');

    // (d) unknown methods: UNIMPLEMENTED at once (the deadline only bounds a hang).
    for (const method of ['/opentelemetry.proto.collector.trace.v1.TraceService/Nope',
      '/grpc.health.v1.Health/Check', '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export']) {
      r = await client.call(real, { method, timeoutMs: 10000 });
      assert.equal(r.code, S.UNIMPLEMENTED, `${method}: ${r.code} '${r.details}'`);
    }

    // An empty request is a valid (empty) export.
    r = await client.call(Buffer.alloc(0));
    assert.equal(r.code, S.OK, `empty request: ${r.code} '${r.details}'`);

    // And after all that, a normal export goes through end to end.
    const ok = peers.serializedSpans(5, 'after-bad');
    r = await client.call(ok.bytes);
    assert.equal(r.code, S.OK, `normal export: ${r.code} '${r.details}'`);
    await gw.waitForSpans(5);
    assert.deepEqual(gw.spans.map((s) => s.spanId).sort(), [...ok.spanIds].sort());
    for (const s of gw.spans) assert.deepEqual(Object.keys(s.attributes), ['gen_ai.request.id']);

    const m = await sf.metrics();
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), 5);

    await sf.stop();
    assert.equal(gw.spans.length, 5, 'nothing from the refused requests reached the gateway');
  });
});
