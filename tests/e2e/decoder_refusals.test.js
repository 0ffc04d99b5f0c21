// tests/e2e/decoder_refusals.test.js: OTLP/HTTP input that other decoders
// refuse or read otherwise is refused here too, never read a third way
// (issue 21, item 5). The JSON bodies are each judged by the reference
// decoder, Debian's python3-protobuf json_format with the official OTLP
// schema (json_reference.py), and spanfence must agree: a member named twice
// (any level), a lone UTF-16 surrogate escape, a single-quoted name, a bad
// entityRefs. What both accept (entityRefs among it) is also sent as the
// protobuf json_format serialized, and the gateway must receive the same
// bytes both ways. Header lines two readers could read two ways go as raw
// bytes: Content-Length with Transfer-Encoding (400, connection closed),
// two Content-Encoding lines (415), a Content-Type that is not one media
// type (415). Every refusal is counted (requests and spans, reason
// malformed) and nothing refused reaches the gateway.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort, allowlist } = require('./lib/config');
const raw = require('./lib/rawhttp');

const PYTHON = '/usr/bin/python3';   // Debian's, with python3-protobuf
const SOURCE_DIR = process.env.SF_SOURCE_DIR || path.resolve(__dirname, '..', '..');

function config(gatewayPort) {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ http: envPort('HTTP') }) },
    processors: {
      'transform/allowlist': allowlist({ resource: ['service.name'], span: ['gen_ai.request.id'] }),
    },
    exporters: {
      'otlphttp/gateway': {
        endpoint: `http://127.0.0.1:${gatewayPort}`,
        sending_queue: { queue_size: 32, num_consumers: 1 },
      },
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: {
        receivers: ['otlp'],
        processors: ['transform/allowlist'],
        exporters: ['otlphttp/gateway'],
      },
    },
  });
}

// ---- the JSON cases ---------------------------------------------------------

let nextId = 1;
function span(extra = '') {
  const n = (nextId++).toString(16);
  return `{"traceId":"${n.padStart(32, '0')}","spanId":"${n.padStart(16, '0')}","name":"decode_loop",` +
    `"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"gen_ai.request.id",` +
    `"value":{"stringValue":"0123"}}]${extra}}`;
}
// a span whose kept attribute holds bytes, as base64 text
function bytesSpan(b64) {
  const n = (nextId++).toString(16);
  return `{"traceId":"${n.padStart(32, '0')}","spanId":"${n.padStart(16, '0')}","name":"decode_loop",` +
    `"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"gen_ai.request.id",` +
    `"value":{"bytesValue":"${b64}"}}]}`;
}
function request({ spans = [span()], resource = '', top = '' } = {}) {
  return `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":` +
    `{"stringValue":"sglang"}}]${resource}},"scopeSpans":[{"scope":{"name":"sglang server"},` +
    `"spans":[${spans.join(',')}]}]}]${top}}`;
}
const ENTITY = '"entityRefs":[{"schemaUrl":"https://opentelemetry.io/schemas/1.30.0","type":"service",' +
  '"idKeys":["service.name","service.namespace"],"descriptionKeys":["service.version"]},{"type":"host"}]';

// ref: 'json_format' when spanfence must answer as json_format does;
// 'protojson' where json_format takes what Go's protojson refuses (a lone
// surrogate in a string json_format never reads) and spanfence refuses as
// protojson does; 'json-c' where both references take the text but json-c
// would read another name than they do (so spanfence refuses). `spans`: the
// spans in the body, as the receiver's streaming count sees them.
const CASES = [
  { name: 'control', ref: 'json_format', spans: 1, body: request() },
  { name: 'entityRefs', ref: 'json_format', spans: 1, body: request({ resource: `,${ENTITY}` }) },
  { name: 'entity_refs (snake_case)', ref: 'json_format', spans: 1,
    body: request({ resource: ',"entity_refs":[{"schema_url":"s","id_keys":["service.name"],"description_keys":[]}]' }) },
  { name: 'entityRefs idKeys not a list', ref: 'json_format', spans: 1,
    body: request({ resource: ',"entityRefs":[{"idKeys":"service.name"}]' }) },
  { name: 'entityRefs with a null key', ref: 'json_format', spans: 1,
    body: request({ resource: ',"entityRefs":[{"idKeys":["a",null]}]' }) },
  { name: 'resourceSpans twice', ref: 'json_format', spans: 2,
    body: request({ top: ',"resourceSpans":[{"scopeSpans":[{"spans":[' + span() + ']}]}]' }) },
  { name: 'span name twice', ref: 'json_format', spans: 1, body: request({ spans: [span(',"name":"other"')] }) },
  { name: 'span name twice, once escaped', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"n\\u0061me":"other"')] }) },
  { name: 'stringValue twice in an attribute', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"events":[{"name":"e","attributes":[{"key":"k","value":{"stringValue":"a","stringValue":"b"}}]}]')] }) },
  { name: 'unknown member twice, nested', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"vendorExtension":{"x":[{"y":1,"y":2}]}')] }) },
  { name: 'lone high surrogate in a span name', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"events":[{"name":"\\ud800"}]')] }) },
  { name: 'high surrogate then a letter', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"events":[{"name":"\\ud83dx"}]')] }) },
  { name: 'lone low surrogate', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"events":[{"name":"\\ude00"}]')] }) },
  { name: 'two high surrogates', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"events":[{"name":"\\ud83d\\ud83d"}]')] }) },
  { name: 'lone surrogate in an attribute value', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"traceState":"k=\\udfff"')] }) },
  { name: 'lone surrogate in a member name', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"\\ud800":1')] }) },
  { name: 'a surrogate pair is fine', ref: 'json_format', spans: 1,
    body: request({ spans: [span(',"events":[{"name":"\\ud83d\\ude00"}]')] }) },
  { name: 'lone surrogate in an unknown member', ref: 'protojson', spans: 1,
    body: request({ spans: [span(',"vendorExtension":"\\ud800"')] }) },
  // proto3 JSON reads bytes in either base64 alphabet, padded or not
  // (issue 37): the gateway gets the bytes json_format decoded
  { name: 'bytesValue standard, padded', ref: 'json_format', spans: 1,
    body: request({ spans: [bytesSpan('/+8=')] }) },
  { name: 'bytesValue URL-safe, padded', ref: 'json_format', spans: 1,
    body: request({ spans: [bytesSpan('_-8=')] }) },
  { name: 'bytesValue URL-safe, unpadded', ref: 'json_format', spans: 1,
    body: request({ spans: [bytesSpan('_-8')] }) },
  { name: 'bytesValue URL-safe, longer', ref: 'json_format', spans: 1,
    body: request({ spans: [bytesSpan('AP_-ABCD_w')] }) },
  { name: 'single-quoted member name', ref: 'json_format', spans: 0,
    body: request({ spans: [span(",'vendorExtension':1")] }) },
  { name: '\\u0000 in a member name', ref: 'json-c', spans: 1,
    body: `{"resourceSpans\\u0000x":[{"scopeSpans":[{"spans":[${span()}]}]}]}` },
];

function reference(cases) {
  const input = JSON.stringify(cases.map((c) => ({ name: c.name, body: Buffer.from(c.body).toString('base64') })));
  const out = execFileSync(PYTHON, [path.join(__dirname, 'json_reference.py'), SOURCE_DIR,
    path.join(process.env.SF_E2E_TMP || path.join(__dirname, '.tmp', 'decoder_refusals'), 'schema')],
  { input, maxBuffer: 16 << 20 });
  return JSON.parse(out);
}

const post = raw.postHead;

function answerMessage(res) {
  const type = res.response.headers['content-type'];
  if (type === 'application/json') return JSON.parse(res.response.body.toString('utf8')).message;
  return raw.decodeRpcStatus(res.response.body).message;
}

test('input other decoders refuse is refused, counted, and never exported', async () => {
  await harness('decoder_refusals', async (h) => {
    const verdicts = reference(CASES);
    const gw = new Gateway();
    gw.keepBodies = true;
    await gw.start();
    h.onCleanup(() => gw.stop());
    const httpPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config(gw.port),
      env: { SF_HTTP_PORT: String(httpPort), SF_METRICS_PORT: String(metricsPort) },
      grpcPort: httpPort,    // no gRPC here: start() waits for this port to listen
      metricsPort,
    }));
    await sf.start();

    let requests = 0;
    let refused = 0;
    let refusedSpans = 0;
    let acceptedSpans = 0;
    const forwarded = async (what, send) => {
      const before = gw.requests.length;
      const r = await send();
      assert.ok(r.response, `${what}: no answer (${r.error})`);
      assert.equal(r.response.status, 200, `${what}: ${r.response.status} '${r.response.status !== 200 ? answerMessage(r) : ''}'`);
      await gw.waitFor(() => gw.requests.length > before, 'the request to reach the gateway');
      assert.equal(gw.requests.length, before + 1, 'one request in, one out');
      return gw.requests[before];
    };

    // ---- JSON bodies, each judged by json_format first -------------------------
    const table = [];
    for (let i = 0; i < CASES.length; i++) {
      const c = CASES[i];
      const v = verdicts[i];
      assert.equal(v.name, c.name);
      const body = Buffer.from(c.body);
      const send = () => raw.send(httpPort, post('application/json', body.length), body);
      requests++;
      if (c.ref === 'json_format') {
        table.push(`${c.name}: json_format ${v.ok ? 'accepts' : `refuses (${v.error})`}`);
      } else {
        table.push(`${c.name}: json_format ${v.ok ? 'accepts' : 'refuses'}; spanfence refuses as ${c.ref === 'protojson'
          ? "Go's protojson does" : 'json-c would read another name'}`);
      }
      if (c.ref === 'json_format' && v.ok) {
        const viaJson = await forwarded(c.name, send);
        acceptedSpans += c.spans;
        // The same request as json_format read it, over protobuf: the
        // gateway gets the same bytes (entityRefs included), so the JSON
        // path means what the protobuf path means.
        const pb = Buffer.from(v.proto, 'base64');
        requests++;
        const viaProto = await forwarded(`${c.name} (protobuf)`, () => raw.send(httpPort, post('application/x-protobuf', pb.length), pb));
        acceptedSpans += c.spans;
        assert.ok(viaJson.body.length > 0);
        assert.deepEqual(viaJson.body, viaProto.body, `${c.name}: JSON and protobuf exported differently`);
        if (c.name.startsWith('entity')) {
          assert.ok(viaJson.body.includes(Buffer.from('service.namespace')) || c.name.includes('snake'),
            `${c.name}: the entity refs did not reach the gateway`);
        }
        continue;
      }
      const r = await send();
      assert.ok(r.response, `${c.name}: no answer (${r.error})`);
      assert.equal(r.response.status, 400, `${c.name}: ${r.response.status}, json_format: ${v.ok ? 'ok' : v.error}`);
      assert.equal(r.response.headers['content-type'], 'application/json', `${c.name}: answered in the request's encoding`);
      const msg = answerMessage(r);
      assert.ok(/given twice|surrogate|double quotes|\\u0000|expected/.test(msg), `${c.name}: message '${msg}'`);
      refused++;
      refusedSpans += c.spans;
    }
    process.stderr.write(`reference verdicts (python3-protobuf json_format):\n  ${table.join('\n  ')}\n`);

    // ---- header lines ---------------------------------------------------------
    const good = Buffer.from(request());
    // control: parameters as Go's mime.ParseMediaType takes them
    requests++;
    await forwarded('Content-Type with a parameter', () => raw.send(httpPort, post('application/json ; charset="utf-8"', good.length), good));
    acceptedSpans += 1;
    // Content-Type with something after the subtype: 415
    requests++;
    let r = await raw.send(httpPort, post('application/json garbage', good.length), good);
    assert.equal(r.response && r.response.status, 415, 'Content-Type: application/json garbage');
    assert.match(answerMessage(r), /not one media type/);
    refused++;
    // two Content-Encoding lines: stacked codings, 415 (even both "identity")
    requests++;
    r = await raw.send(httpPort, post('application/json', good.length,
      ['Content-Encoding: identity', 'Content-Encoding: identity']), good);
    assert.equal(r.response && r.response.status, 415, 'two Content-Encoding lines');
    assert.match(answerMessage(r), /Content-Encoding given twice/);
    refused++;
    // Content-Length and Transfer-Encoding: 400, and the connection is closed
    requests++;
    const chunked = Buffer.concat([Buffer.from(`${good.length.toString(16)}\r\n`), good, Buffer.from('\r\n0\r\n\r\n')]);
    r = await raw.send(httpPort, post('application/json', 7, ['Transfer-Encoding: chunked']), chunked,
      { waitCloseMs: 5000 });
    assert.equal(r.response && r.response.status, 400, 'Content-Length with Transfer-Encoding');
    assert.match(answerMessage(r), /both Content-Length and Transfer-Encoding/);
    assert.equal(r.closed, true, 'Content-Length with Transfer-Encoding: connection left open');
    refused++;

    // ---- accounting -------------------------------------------------------------
    const HTTP = { receiver: 'otlp', transport: 'http' };
    const m = await sf.waitMetrics((x) => x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/gateway' }) === acceptedSpans,
      `sent == ${acceptedSpans}`);
    assert.equal(m.must('spanfence_receiver_requests', HTTP), requests);
    assert.equal(m.must('spanfence_receiver_refused_requests', { ...HTTP, reason: 'malformed' }), refused);
    assert.equal(m.must('otelcol_receiver_refused_spans', { ...HTTP, reason: 'malformed' }), refusedSpans);
    assert.equal(m.must('otelcol_receiver_accepted_spans', HTTP), acceptedSpans);
    assert.equal(gw.spans.length, acceptedSpans, 'nothing refused reached the gateway');
    assert.equal(sf.exit, null);
    await sf.stop();
  });
});
