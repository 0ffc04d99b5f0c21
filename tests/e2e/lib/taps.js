// tests/e2e/lib/taps.js: transparent loopback proxies that record what
// crossed the wire, so a test can prove a request really was compressed:
// HttpTap (HTTP/1.1: method, path, headers, raw body) and GrpcTap (HTTP/2
// gRPC: path, grpc-encoding and the compressed flag of every message frame).
// They forward bytes unchanged and answer with whatever the target answered.
'use strict';

const http = require('node:http');
const http2 = require('node:http2');

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.removeListener('error', reject);
      resolve(server.address().port);
    });
  });
}

class HttpTap {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.requests = [];   // {method, path, headers, body: Buffer, status}
    this.server = http.createServer((req, res) => this._handle(req, res));
    this.port = 0;
  }

  async start() {
    this.port = await listen(this.server);
    return this.port;
  }

  stop() {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  _handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const rec = { method: req.method, path: req.url, headers: req.headers, body, status: 0 };
      this.requests.push(rec);
      const headers = { ...req.headers };
      delete headers.connection;
      headers['content-length'] = String(body.length);
      delete headers['transfer-encoding'];
      const up = http.request({ host: '127.0.0.1', port: this.targetPort, method: req.method, path: req.url, headers }, (ur) => {
        rec.status = ur.statusCode;
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      });
      up.on('error', (e) => {
        rec.status = 502;
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`tap: ${e.message}`);
      });
      up.end(body);
    });
  }
}

// The gRPC length-prefixed messages of a request body: [{compressed, length,
// head}], head being the message's first 4 bytes in hex (1f8b08.. is gzip).
function grpcFrames(body) {
  const out = [];
  let off = 0;
  while (off + 5 <= body.length) {
    const length = body.readUInt32BE(off + 1);
    out.push({ compressed: body[off], length, head: body.subarray(off + 5, off + 5 + Math.min(4, length)).toString('hex') });
    off += 5 + length;
  }
  if (off !== body.length) out.push({ truncated: true });
  return out;
}

const HOP = new Set([':status', ':path', ':method', ':scheme', ':authority', 'connection']);
function plainHeaders(h) {
  const o = {};
  for (const [k, v] of Object.entries(h)) if (!HOP.has(k)) o[k] = v;
  return o;
}

class GrpcTap {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.calls = [];   // {path, encoding, frames: [{compressed, length, head}], status}
    this.server = http2.createServer();
    this.server.on('stream', (stream, headers) => this._handle(stream, headers));
    this.server.on('session', (s) => this.sessions.add(s));
    this.sessions = new Set();
    this.upstream = null;
    this.port = 0;
  }

  async start() {
    this.port = await listen(this.server);
    return this.port;
  }

  stop() {
    if (this.upstream) this.upstream.destroy();
    for (const s of this.sessions) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  _session() {
    if (!this.upstream || this.upstream.destroyed || this.upstream.closed) {
      this.upstream = http2.connect(`http://127.0.0.1:${this.targetPort}`);
      this.upstream.on('error', () => {});
    }
    return this.upstream;
  }

  _handle(stream, headers) {
    const rec = { path: headers[':path'], encoding: headers['grpc-encoding'] || 'identity', frames: [], status: null };
    this.calls.push(rec);
    const chunks = [];
    const up = this._session().request({
      ':method': headers[':method'], ':path': headers[':path'], ...plainHeaders(headers),
    });
    let trailers = null;
    up.on('response', (h, flags) => {
      if (h['grpc-status'] !== undefined) rec.status = Number(h['grpc-status']);
      // eslint-disable-next-line no-bitwise
      const endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      if (stream.destroyed) return;
      stream.respond({ ':status': h[':status'], ...plainHeaders(h) }, endStream ? { endStream: true } : { waitForTrailers: true });
    });
    up.on('trailers', (t) => {
      trailers = t;
      if (t['grpc-status'] !== undefined) rec.status = Number(t['grpc-status']);
    });
    up.on('data', (c) => { if (!stream.destroyed) stream.write(c); });
    up.on('end', () => {
      if (stream.destroyed || stream.writableEnded) return;
      stream.once('wantTrailers', () => stream.sendTrailers(plainHeaders(trailers || { 'grpc-status': '14' })));
      stream.end();
    });
    up.on('error', () => { if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR); });
    stream.on('error', () => up.close(http2.constants.NGHTTP2_CANCEL));
    stream.on('data', (c) => { chunks.push(c); up.write(c); });
    stream.on('end', () => {
      rec.frames = grpcFrames(Buffer.concat(chunks));
      up.end();
    });
  }
}

module.exports = { HttpTap, GrpcTap, grpcFrames };
