// tests/e2e/lib/senders.js: the official OpenTelemetry JS SDK exporters for
// all three OTLP transports (gRPC, HTTP/protobuf, HTTP/JSON), with or without
// gzip, sending the same LLM-serving-like spans as peers.sendSdkSpans
// (allowlisted and secret attributes, events with both, error statuses with
// secret messages). Also the OTLP/JSON reader for the file exporter's output.
'use strict';

const deps = require('./deps');
const peers = require('./peers');
const proto = require('./proto');


const PROTOCOLS = ['grpc', 'http-protobuf', 'http-json'];

// An SDK exporter for `protocol` aimed at 127.0.0.1 (grpcPort for gRPC,
// httpPort for both HTTP ones), compression 'gzip' or 'none'.
function makeExporter(protocol, { grpcPort, httpPort, compression }) {
  const common = { compression, timeoutMillis: 20000 };
  switch (protocol) {
    case 'grpc':
      return new (deps.load('@opentelemetry/exporter-trace-otlp-grpc').OTLPTraceExporter)({
        url: `http://127.0.0.1:${grpcPort}`, ...common,
      });
    case 'http-protobuf':
      return new (deps.load('@opentelemetry/exporter-trace-otlp-proto').OTLPTraceExporter)({
        url: `http://127.0.0.1:${httpPort}/v1/traces`, ...common,
      });
    case 'http-json':
      return new (deps.load('@opentelemetry/exporter-trace-otlp-http').OTLPTraceExporter)({
        url: `http://127.0.0.1:${httpPort}/v1/traces`, ...common,
      });
    default:
      throw new Error(`unknown protocol ${protocol}`);
  }
}

// Makes `n` spans (the data of peers.sendSdkSpans) and exports them through
// `exporter` in batches of `batchSize`. Returns {sent: ReadableSpan[], results}.
function sendSpans(exporter, { n, batchSize = 10, prefix }) {
  return peers.sendSpansThrough(exporter, { n, batchSize, prefix, resource: { 'sender.prefix': prefix } });
}

// ---- OTLP/JSON (the file exporter's json format) ---------------------------

// OTLP/JSON differs from proto3 JSON in one way that matters here: trace and
// span ids are hex, not base64. Rewrite them, then let protobufjs' own
// fromObject build the message from the official protos.
const ID_KEYS = new Set(['traceId', 'spanId', 'parentSpanId']);
function hexIdsToBase64(v, key) {
  if (Array.isArray(v)) return v.map((x) => hexIdsToBase64(x));
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = hexIdsToBase64(x, k);
    return o;
  }
  if (ID_KEYS.has(key) && typeof v === 'string') {
    if (!/^([0-9a-f]{2})*$/.test(v)) throw new Error(`${key} '${v}' is not lowercase hex`);
    return Buffer.from(v, 'hex').toString('base64');
  }
  return v;
}

function decodeJsonRequest(text) {
  const obj = JSON.parse(text);
  return proto.RequestType.fromObject(hexIdsToBase64(obj));
}

// Span records (proto.spanRecords shape) from the lines of a json file.
function jsonLinesRecords(text) {
  const lines = text.split('\n');
  if (lines[lines.length - 1] !== '') throw new Error('json file does not end with a newline');
  lines.pop();
  const out = [];
  lines.forEach((l, i) => {
    try {
      out.push(...proto.spanRecords(decodeJsonRequest(l)));
    } catch (e) {
      throw new Error(`line ${i + 1}: ${e.message}: ${l.slice(0, 200)}`);
    }
  });
  return { records: out, lines: lines.length };
}

// Span records from a proto-format file: 4-byte big-endian length + request.
function protoFileRecords(buf) {
  const out = [];
  let off = 0;
  let n = 0;
  while (off < buf.length) {
    if (off + 4 > buf.length) throw new Error(`truncated length prefix at byte ${off}`);
    const len = buf.readUInt32BE(off);
    if (off + 4 + len > buf.length) throw new Error(`truncated record at byte ${off} (length ${len})`);
    out.push(...proto.spanRecords(proto.decodeRequest(buf.subarray(off + 4, off + 4 + len))));
    off += 4 + len;
    n++;
  }
  return { records: out, lines: n };
}

module.exports = { PROTOCOLS, makeExporter, sendSpans, decodeJsonRequest, jsonLinesRecords, protoFileRecords };
