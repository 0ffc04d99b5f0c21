// tests/e2e/lib/gateway.js: a mock OTLP/HTTP gateway on 127.0.0.1. It takes
// POST /v1/traces, gunzips (or un-zstds, with Debian's zstd CLI: node 20's
// zlib has no zstd), decodes with the independent decoder (official
// protos via protobufjs) and records every span it ACCEPTED; its behaviour is
// scripted (fail the first N requests, answer a fixed status, go down and come
// back on the same port).
'use strict';

const http = require('node:http');
const zlib = require('node:zlib');
const { execFileSync } = require('node:child_process');
const proto = require('./proto');

// zstd -d of a whole body; throws (the request gets 400) when it is not zstd.
function unzstd(body) {
  return execFileSync('zstd', ['-d', '-q', '-c'], { input: body, maxBuffer: 256 * 1024 * 1024 });
}

class Gateway {
  constructor() {
    this.port = 0;
    this.server = null;
    this.sockets = new Set();
    this.requests = [];   // every request: {method, path, headers, status, spans, error, head (first 4 bytes, hex), bytes}
    this.spans = [];      // span records from accepted (2xx) requests, in arrival order
    this.failNext = 0;    // answer failStatus to this many more requests
    this.failStatus = 503;
    this.status = 200;    // answer to everything else
    this.replyDelayMs = 0; // hold every answer this long after the whole body arrived
    this.keepBodies = false; // keep each accepted request's (decompressed) body as rec.body
    this.waiters = [];
  }

  // Answer `status` to the next `n` requests, then behave normally.
  failFirst(n, status = 503) {
    this.failNext = n;
    this.failStatus = status;
  }

  setStatus(status) {
    this.status = status;
  }

  // Listen (again) on 127.0.0.1; the first start picks a free port, later
  // starts reuse it so the collector's endpoint stays valid.
  start() {
    return new Promise((resolve, reject) => {
      const server = http.createServer((req, res) => this._handle(req, res));
      server.on('connection', (s) => {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
      });
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => {
        server.removeListener('error', reject);
        this.port = server.address().port;
        this.server = server;
        resolve(this.port);
      });
    });
  }

  // Stop listening and drop open connections: the collector sees a gateway
  // that is down (connection refused), not one that is slow.
  stop() {
    const server = this.server;
    this.server = null;
    if (!server) return Promise.resolve();
    return new Promise((resolve) => {
      server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
      this.sockets.clear();
    });
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  _handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const rec = { method: req.method, path: req.url, headers: req.headers, status: 0, spans: 0, error: null,
        head: Buffer.concat(chunks).subarray(0, 4).toString('hex'), bytes: chunks.reduce((a, c) => a + c.length, 0) };
      this.requests.push(rec);
      const reply = (status, body = Buffer.alloc(0), type = 'application/x-protobuf') => {
        const send = () => {
          rec.status = status;
          res.writeHead(status, { 'Content-Type': type, 'Content-Length': body.length });
          res.end(body);
          this._wake();
        };
        if (this.replyDelayMs > 0) setTimeout(send, this.replyDelayMs);
        else send();
      };
      if (req.method !== 'POST' || req.url !== '/v1/traces') return reply(404, Buffer.from('not found'), 'text/plain');
      if (this.failNext > 0) {
        this.failNext--;
        return reply(this.failStatus, Buffer.from('scripted failure'), 'text/plain');
      }
      if (this.status < 200 || this.status > 299) return reply(this.status, Buffer.from('scripted status'), 'text/plain');
      let records;
      let body = Buffer.concat(chunks);
      try {
        if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
        else if (req.headers['content-encoding'] === 'zstd') body = unzstd(body);
        else if (req.headers['content-encoding']) throw new Error(`unexpected content-encoding ${req.headers['content-encoding']}`);
        records = proto.spanRecords(proto.decodeRequest(body));
      } catch (e) {
        rec.error = e.message;
        return reply(400, Buffer.from(e.message), 'text/plain');
      }
      rec.spans = records.length;
      if (this.keepBodies) rec.body = body;
      this.spans.push(...records);
      this._wake();
      return reply(200, proto.encodeResponse());
    });
  }

  _wake() {
    for (const w of this.waiters.slice()) w();
  }

  // Resolves once `pred()` holds; rejects after timeoutMs (a bound on a wait,
  // not a timing assertion).
  waitFor(pred, what, timeoutMs = 30000) {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
        if (pred()) resolve();
      };
      const check = () => { if (pred()) done(); };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`gateway: timed out waiting for ${what} ` +
          `(spans=${this.spans.length}, requests=${this.requests.length}, statuses=${this.statusSummary()})`));
      }, timeoutMs);
      this.waiters.push(check);
    });
  }

  waitForSpans(n, timeoutMs) {
    return this.waitFor(() => this.spans.length >= n, `${n} spans`, timeoutMs);
  }

  // {"200": 4, "503": 3}
  statusSummary() {
    const o = {};
    for (const r of this.requests) o[r.status] = (o[r.status] || 0) + 1;
    return JSON.stringify(o);
  }

  // span ids that arrived more than once
  duplicates() {
    const seen = new Map();
    for (const s of this.spans) seen.set(s.spanId, (seen.get(s.spanId) || 0) + 1);
    return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
  }
}

module.exports = { Gateway, unzstd };
