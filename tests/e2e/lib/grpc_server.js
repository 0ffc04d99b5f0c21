// tests/e2e/lib/grpc_server.js: a real OTLP/gRPC trace server on 127.0.0.1,
// built with @grpc/grpc-js, serving
// opentelemetry.proto.collector.trace.v1.TraceService/Export. It decodes each
// request with the independent decoder (official protos via protobufjs, not
// spanfence's .proto files), records every span it ACCEPTED, and is
// scriptable: answer a status code to the first N calls, answer a fixed
// status, go down and come back on the same port.
'use strict';

const deps = require('./deps');
const proto = require('./proto');

const grpc = deps.grpc();

const SERVICE = {
  Export: {
    path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
    requestStream: false,
    responseStream: false,
    // Raw bytes in and out: decoding is ours, so a decode failure is
    // recorded instead of being swallowed by grpc-js.
    requestSerialize: (b) => b,
    requestDeserialize: (b) => b,
    responseSerialize: (b) => b,
    responseDeserialize: (b) => b,
  },
};

class OtlpGrpcServer {
  constructor() {
    this.port = 0;
    this.server = null;
    this.calls = [];      // every call: {code, spans, metadata, error, bytes}
    this.spans = [];      // span records from calls answered OK, in arrival order
    this.failNext = 0;    // answer failCode to this many more calls
    this.failCode = grpc.status.UNAVAILABLE;
    this.code = grpc.status.OK;   // answer to everything else
    this.waiters = [];
  }

  failFirst(n, code = grpc.status.UNAVAILABLE) {
    this.failNext = n;
    this.failCode = code;
  }

  setCode(code) {
    this.code = code;
  }

  // Listen (again); the first start picks a free port, later ones reuse it.
  start() {
    const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
    server.addService(SERVICE, { Export: (call, cb) => this._export(call, cb) });
    return new Promise((resolve, reject) => {
      server.bindAsync(`127.0.0.1:${this.port}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) return reject(err);
        this.port = port;
        this.server = server;
        return resolve(port);
      });
    });
  }

  // Stop at once and drop connections: the exporter sees a server that is
  // down (connection refused), not a slow one.
  stop() {
    const server = this.server;
    this.server = null;
    if (server) server.forceShutdown();
    return Promise.resolve();
  }

  get endpoint() {
    return `127.0.0.1:${this.port}`;
  }

  _export(call, cb) {
    const rec = { code: -1, spans: 0, metadata: call.metadata.getMap(), error: null, bytes: call.request.length };
    this.calls.push(rec);
    const answer = (code, details) => {
      rec.code = code;
      if (code === grpc.status.OK) cb(null, proto.encodeResponse());
      else cb({ code, details });
      this._wake();
    };
    if (this.failNext > 0) {
      this.failNext--;
      return answer(this.failCode, 'scripted failure');
    }
    if (this.code !== grpc.status.OK) return answer(this.code, 'scripted status');
    let records;
    try {
      records = proto.spanRecords(proto.decodeRequest(call.request));
    } catch (e) {
      rec.error = e.message;
      return answer(grpc.status.INVALID_ARGUMENT, `test server cannot decode: ${e.message}`);
    }
    rec.spans = records.length;
    this.spans.push(...records);
    return answer(grpc.status.OK);
  }

  _wake() {
    for (const w of this.waiters.slice()) w();
  }

  // Resolves once pred() holds; rejects after timeoutMs (a bound on a wait,
  // not a timing assertion).
  waitFor(pred, what, timeoutMs = 30000) {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!pred()) return;
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`grpc server: timed out waiting for ${what} ` +
          `(spans=${this.spans.length}, calls=${this.calls.length}, codes=${this.codeSummary()})`));
      }, timeoutMs);
      this.waiters.push(check);
    });
  }

  waitForSpans(n, timeoutMs) {
    return this.waitFor(() => this.spans.length >= n, `${n} spans`, timeoutMs);
  }

  // {"0": 4, "14": 3}
  codeSummary() {
    const o = {};
    for (const c of this.calls) o[c.code] = (o[c.code] || 0) + 1;
    return JSON.stringify(o);
  }

  duplicates() {
    const seen = new Map();
    for (const s of this.spans) seen.set(s.spanId, (seen.get(s.spanId) || 0) + 1);
    return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
  }
}

module.exports = { OtlpGrpcServer, status: grpc.status };
