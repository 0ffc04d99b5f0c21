// tests/e2e/schema_compat.test.js: wire compatibility of spanfence's own OTLP
// schema (pipeline/proto, compiled by protoc-c) with an independent
// implementation: the official JS SDK's serializer and the protobufjs code
// generated from the official protos that ships with it. Needs only
// tools/otlp_codec, not the collector.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');

const deps = require('./lib/deps');
const proto = require('./lib/proto');

const CODEC = deps.codecBin();
const api = deps.api();
const sdk = deps.sdk();
const { resourceFromAttributes } = deps.resources();
const { ProtobufTraceSerializer } = deps.transformer();

function codec(args, input) {
  const r = spawnSync(CODEC, args, { input, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr.toString() };
}

function cDecode(bytes, extra = []) {
  const r = codec(['decode', ...extra], bytes);
  assert.equal(r.status, 0, `otlp_codec decode failed: ${r.stderr}`);
  return JSON.parse(r.stdout.toString('utf8'));
}

// ---- what the OTLP spec says an SDK attribute value becomes ----------------
function expectAny(v) {
  if (typeof v === 'string') return { string: v };
  if (typeof v === 'boolean') return { bool: v };
  if (typeof v === 'number') {
    return Number.isInteger(v) ? { int: String(v) } : { double: proto.doubleBits(v) };
  }
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('hex') };
  if (Array.isArray(v)) return { array: v.map(expectAny) };
  if (v && typeof v === 'object') return { kvlist: expectKvs(v) };
  throw new Error(`no OTLP mapping for ${typeof v}`);
}
const expectKvs = (attrs) => Object.entries(attrs || {}).map(([key, v]) => ({ key, value: expectAny(v) }));
const hrNanos = (hr) => (BigInt(hr[0]) * 1000000000n + BigInt(hr[1])).toString();

// ---- spans made by the SDK -------------------------------------------------
const RESOURCE_ATTRS = {
  'service.name': 'llm-serving',
  'service.instance.id': 'i-0abc',
  'host.cpu.count': 2,
  'node.weight': 0.75,
  'cvm.attested': true,
  'deployment.zones': ['a', 'b'],
};

function makeSdkSpans() {
  const exporter = new sdk.InMemorySpanExporter();
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes(RESOURCE_ATTRS),
    spanProcessors: [new sdk.SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('spanfence.schema-compat', '9.8.7');
  const ctx = api.context.active();

  // A remote parent with a trace state: the child carries it, and the
  // serializer sets the "has is_remote" and "is_remote" span flags.
  const remote = {
    traceId: 'abcdef0123456789abcdef0123456789',
    spanId: '0011223344556677',
    traceFlags: api.TraceFlags.SAMPLED,
    isRemote: true,
    traceState: api.createTraceState('vendor=a,other=b'),
  };
  const root = tracer.startSpan('chat completion \u2603', {
    kind: api.SpanKind.SERVER,
    startTime: [1700000000, 123456789],
    attributes: {
      'gen_ai.request.id': 'req-1',
      'gen_ai.usage.prompt_tokens': 1234,
      'neg.int': -7,
      'big.int': 2 ** 53,
      'ratio': 0.1,
      'flag.true': true,
      'flag.false': false,
      'empty': '',
      'utf8': 'h\u00e9llo \u2603 \u{1F600}',
      'escapes': 'quote " backslash \\ newline \n tab \t ctl \u0001',
      'str.array': ['x', 'y', ''],
      'int.array': [1, -2, 3],
      'double.array': [0.5, 1.25],
      'bool.array': [true, false],
    },
  }, api.trace.setSpanContext(ctx, remote));
  root.addEvent('gen_ai.content.prompt', { bid: 'b-1', batch_size: 8, 'prompt.text': 'secret' },
    [1700000000, 200000000]);
  root.addEvent('no-attributes', [1700000000, 300000000]);
  root.setStatus({ code: api.SpanStatusCode.ERROR, message: 'boom: user@example.com' });
  root.end([1700000001, 5]);

  const child = tracer.startSpan('decode step', {
    kind: api.SpanKind.CLIENT,
    startTime: [1700000000, 500000000],
    links: [{
      context: root.spanContext(),
      attributes: { 'link.kind': 'follows', 'link.weight': 2.5 },
    }, {
      context: { traceId: '0102030405060708090a0b0c0d0e0f10', spanId: '1112131415161718',
        traceFlags: 0, traceState: api.createTraceState('ls=1') },
    }],
  }, api.trace.setSpan(ctx, root));
  child.setStatus({ code: api.SpanStatusCode.OK });
  child.end([1700000000, 600000000]);

  const plain = tracer.startSpan('internal-op', { startTime: [1, 2] });
  plain.end([3, 4]);

  const spans = exporter.getFinishedSpans();
  assert.equal(spans.length, 3);

  // Values the SDK's attribute API refuses but the OTLP schema and the
  // serializer carry: bytes, key-value lists, nested and mixed arrays.
  const r = spans.find((s) => s.name === 'chat completion \u2603');
  Object.assign(r.attributes, {
    'bytes': new Uint8Array([0x00, 0x01, 0xfe, 0xff]),
    'kvlist': { inner: 'v', n: 3, nested: { deep: -1, list: [1, 'two'] } },
    'nested.array': [[1, 2], ['a', [true]], [], { k: 0.5 }],
    'mixed.array': ['s', 1, 2.5, false, new Uint8Array([7])],
  });
  return spans;
}

function expectSpan(s) {
  const sc = s.spanContext();
  const parent = s.parentSpanContext;
  return {
    trace_id: sc.traceId,
    span_id: sc.spanId,
    trace_state: sc.traceState ? sc.traceState.serialize() : '',
    parent_span_id: parent ? parent.spanId : '',
    name: s.name,
    kind: s.kind + 1,
    start_time_unix_nano: hrNanos(s.startTime),
    end_time_unix_nano: hrNanos(s.endTime),
    attributes: expectKvs(s.attributes),
    dropped_attributes_count: s.droppedAttributesCount,
    events: s.events.map((e) => ({
      time_unix_nano: hrNanos(e.time),
      name: e.name,
      attributes: expectKvs(e.attributes),
      dropped_attributes_count: e.droppedAttributesCount || 0,
    })),
    dropped_events_count: s.droppedEventsCount,
    links: s.links.map((l) => ({
      trace_id: l.context.traceId,
      span_id: l.context.spanId,
      trace_state: l.context.traceState ? l.context.traceState.serialize() : '',
      attributes: expectKvs(l.attributes),
      dropped_attributes_count: l.droppedAttributesCount || 0,
    })),
    dropped_links_count: s.droppedLinksCount,
    status: { message: s.status.message || '', code: s.status.code },
  };
}

// ---- (a) JS serializer bytes -> our protobuf-c code -------------------------
test('bytes from the official JS serializer decode with our generated code, every field', () => {
  const spans = makeSdkSpans();
  const bytes = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans));
  const ours = cDecode(bytes);

  assert.equal(ours.unknown_fields, 0, 'our schema lacks a field the JS serializer sends');

  // 1. Same tree as the independent decoder sees, field by field.
  const theirs = proto.canonRequest(proto.decodeRequest(bytes));
  assert.deepEqual({ ...ours, unknown_fields: undefined }, { ...theirs, unknown_fields: undefined });

  // 2. And what the SDK put in, by the OTLP mapping.
  assert.equal(ours.resource_spans.length, 1);
  const rs = ours.resource_spans[0];
  assert.deepEqual(rs.resource.attributes, expectKvs(spans[0].resource.attributes));
  assert.equal(rs.scope_spans.length, 1);
  assert.equal(rs.scope_spans[0].scope.name, 'spanfence.schema-compat');
  assert.equal(rs.scope_spans[0].scope.version, '9.8.7');
  const got = rs.scope_spans[0].spans;
  assert.equal(got.length, spans.length);
  for (const s of spans) {
    const g = got.find((x) => x.span_id === s.spanContext().spanId);
    assert.ok(g, `span ${s.name} missing after decoding`);
    const { flags, ...rest } = g;
    const linkFlags = rest.links.map((l) => l.flags);
    rest.links = rest.links.map(({ flags: _f, ...l }) => l);
    assert.deepEqual(rest, expectSpan(s), `span ${s.name}`);
    // W3C trace flags in the low byte; bit 8 "has is_remote", bit 9 "is_remote".
    assert.equal(flags & 0xff, s.spanContext().traceFlags, `span ${s.name} flags ${flags}`);
    assert.equal(linkFlags.length, s.links.length);
  }
  const root = got.find((x) => x.name === 'chat completion \u2603');
  assert.equal(root.flags, 0x301, 'remote parent: sampled | has_is_remote | is_remote');
  assert.equal(root.trace_state, 'vendor=a,other=b');
  assert.equal(root.parent_span_id, '0011223344556677');
  assert.equal(root.status.code, 2);
  assert.equal(root.status.message, 'boom: user@example.com');
  const attr = Object.fromEntries(root.attributes.map((kv) => [kv.key, kv.value]));
  assert.deepEqual(attr['big.int'], { int: '9007199254740992' });
  assert.deepEqual(attr['neg.int'], { int: '-7' });
  assert.deepEqual(attr.ratio, { double: '3fb999999999999a' });
  assert.deepEqual(attr.bytes, { bytes: '0001feff' });
  assert.deepEqual(attr.kvlist.kvlist[2], {
    key: 'nested',
    value: { kvlist: [{ key: 'deep', value: { int: '-1' } },
      { key: 'list', value: { array: [{ int: '1' }, { string: 'two' }] } }] },
  });
});

// ---- (b) our bytes -> the independent decoder --------------------------------
const D = (hexBits) => ({ double: hexBits });
const SAMPLE = {
  resource_spans: [{
    resource: {
      attributes: [
        { key: 'service.name', value: { string: 'sample-svc' } },
        { key: 'host.pid', value: { int: '12345' } },
      ],
      dropped_attributes_count: 3,
    },
    schema_url: 'https://opentelemetry.io/schemas/1.21.0',
    scope_spans: [{
      scope: {
        name: 'spanfence.sample', version: '1.2.3',
        attributes: [{ key: 'scope.attr', value: { bool: true } }],
        dropped_attributes_count: 1,
      },
      schema_url: 'https://example.test/scope-schema',
      spans: [{
        trace_id: '0102030405060708090a0b0c0d0e0f10',
        span_id: '1112131415161718',
        trace_state: 'vendor=a,other=b',
        parent_span_id: '2122232425262728',
        flags: 0x301,
        name: 'chat completion \u2603',
        kind: 2,
        start_time_unix_nano: '1700000000123456789',
        end_time_unix_nano: '18446744073709551615',
        attributes: [
          { key: 's', value: { string: 'hello "quoted"\n\t\\ \u00fcn\u00ef \u2603' } },
          { key: 'empty', value: { string: '' } },
          { key: 'b_true', value: { bool: true } },
          { key: 'b_false', value: { bool: false } },
          { key: 'i_min', value: { int: '-9223372036854775808' } },
          { key: 'i_max', value: { int: '9223372036854775807' } },
          { key: 'i_neg', value: { int: '-42' } },
          { key: 'd', value: D('400921fb54442d18') },
          { key: 'd_neg0', value: D('8000000000000000') },
          { key: 'd_inf', value: D('7ff0000000000000') },
          { key: 'd_big', value: D('7fe1ccf385ebc8a0') },
          { key: 'arr', value: { array: [
            { string: 'x' }, { int: '7' }, D('3fe0000000000000'), { bool: true },
            { array: [{ array: [{ int: '1' }] }, { kvlist: [{ key: 'k', value: { string: 'v' } }] }] },
            { bytes: '00ff' },
            {},
          ] } },
          { key: 'kv', value: { kvlist: [
            { key: 'inner', value: { string: 'v' } },
            { key: 'nested', value: { kvlist: [{ key: 'deep', value: { int: '-1' } }] } },
            { key: 'noval', value: null },
          ] } },
          { key: 'bytes', value: { bytes: '0001feff' } },
          { key: 'unset', value: {} },
          { key: 'novalue', value: null },
        ],
        dropped_attributes_count: 5,
        events: [{
          time_unix_nano: '1700000000000000001',
          name: 'gen_ai.content.prompt',
          attributes: [
            { key: 'bid', value: { string: 'b-1' } },
            { key: 'batch_size', value: { int: '8' } },
          ],
          dropped_attributes_count: 2,
        }, {
          time_unix_nano: '0', name: '', attributes: [], dropped_attributes_count: 0,
        }],
        dropped_events_count: 4,
        links: [{
          trace_id: 'a0a1a2a3a4a5a6a7a8a9aaabacadaeaf',
          span_id: 'b0b1b2b3b4b5b6b7',
          trace_state: 'ls=1',
          attributes: [{ key: 'link.attr', value: D('4004000000000000') }],
          dropped_attributes_count: 1,
          flags: 0x100,
        }],
        dropped_links_count: 6,
        status: { message: 'boom: secret', code: 2 },
      }, {
        trace_id: '0102030405060708090a0b0c0d0e0f10',
        span_id: '3132333435363738',
        trace_state: '', parent_span_id: '', flags: 0, name: 'minimal', kind: 0,
        start_time_unix_nano: '0', end_time_unix_nano: '0',
        attributes: [], dropped_attributes_count: 0, events: [], dropped_events_count: 0,
        links: [], dropped_links_count: 0, status: null,
      }],
    }],
  }, {
    resource: null,
    schema_url: '',
    scope_spans: [{
      scope: null,
      schema_url: '',
      spans: [{
        trace_id: 'ffeeddccbbaa99887766554433221100',
        span_id: '4142434445464748',
        trace_state: '', parent_span_id: '', flags: 0, name: 'consume', kind: 5,
        start_time_unix_nano: '1', end_time_unix_nano: '2',
        attributes: [{ key: 'empty_arr', value: { array: [] } }],
        dropped_attributes_count: 0, events: [], dropped_events_count: 0,
        links: [], dropped_links_count: 0, status: null,
      }],
    }],
  }],
};

test('bytes from our generated code decode with the independent decoder, every field', () => {
  const r = codec(['encode-sample']);
  assert.equal(r.status, 0, r.stderr);
  const bytes = r.stdout;
  assert.ok(bytes.length > 500, `sample is ${bytes.length} bytes`);

  // The official protos see exactly the request the C code built...
  const theirs = proto.canonRequest(proto.decodeRequest(bytes));
  assert.deepEqual(theirs, SAMPLE);
  // ...and protobufjs' own verifier accepts it.
  const msg = proto.decodeRequest(bytes);
  assert.equal(proto.RequestType.verify(msg), null);

  // Our decoder reads its own bytes back identically, with nothing unknown.
  const ours = cDecode(bytes);
  assert.equal(ours.unknown_fields, 0);
  delete ours.unknown_fields;
  assert.deepEqual(ours, SAMPLE);

  // The independent encoder re-encodes the decoded message; we decode that.
  const again = Buffer.from(proto.RequestType.encode(msg).finish());
  const ours2 = cDecode(again);
  delete ours2.unknown_fields;
  assert.deepEqual(ours2, SAMPLE);
});

// ---- (c) decode + re-pack with our code loses nothing -------------------------
test('JS request -> our decode + pack -> independent decoder: identical tree', () => {
  const bytes = Buffer.from(ProtobufTraceSerializer.serializeRequest(makeSdkSpans()));
  const r = codec(['reencode'], bytes);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(proto.canonRequest(proto.decodeRequest(r.stdout)),
    proto.canonRequest(proto.decodeRequest(bytes)));
});

// ---- (d) our depth guard on nesting the SDK's serializer produces --------------
test('nesting deeper than max_depth is refused before protobuf-c sees it', () => {
  const spans = makeSdkSpans();
  let deep = 'bottom';
  for (let i = 0; i < 40; i++) deep = [deep];
  spans[0].attributes.deep = deep;
  const bytes = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans));

  const refused = codec(['decode'], bytes);   // default max depth: 32
  assert.equal(refused.status, 1);
  assert.equal(refused.stderr, 'otlp_codec: decode: invalid input\n');

  const ok = cDecode(bytes, ['--max-depth', '64']);
  const s = ok.resource_spans[0].scope_spans[0].spans.find((x) => x.span_id === spans[0].spanContext().spanId);
  let v = s.attributes.find((kv) => kv.key === 'deep').value;
  let levels = 0;
  while (v.array) { v = v.array[0]; levels++; }
  assert.equal(levels, 40);
  assert.deepEqual(v, { string: 'bottom' });
});
