// tests/e2e/lib/rawhttp.js: HTTP/1.1 requests as bytes on a plain TCP
// socket, for inputs a well-behaved client library would not send (a body
// shorter than its Content-Length, 100 KB headers) and to see whether the
// server closed the connection. Also google.rpc.Status decoding (built here
// with protobufjs from the field numbers of google/rpc/status.proto).
// RAWHTTP_DEBUG=1 logs each request's outcome and duration to stderr.
'use strict';

const net = require('node:net');
const deps = require('./deps');

const protobuf = deps.load('protobufjs');

const RpcStatus = new protobuf.Type('Status')
  .add(new protobuf.Field('code', 1, 'int32'))
  .add(new protobuf.Field('message', 2, 'string'))
  .add(new protobuf.Field('details', 3, 'bytes', 'repeated'));   // Any, kept opaque
new protobuf.Root().define('google.rpc').add(RpcStatus);

function decodeRpcStatus(buf) {
  return RpcStatus.toObject(RpcStatus.decode(buf), { defaults: true });
}

// Parses one HTTP/1.1 response from `buf`; null if incomplete.
function parseResponse(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0]);
  if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(head[0])}`);
  const headers = {};
  for (const l of head.slice(1)) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let body = buf.subarray(end + 4);
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    if (body.length < n) return null;
    body = body.subarray(0, n);
  } else if (/chunked/i.test(headers['transfer-encoding'] || '')) {
    const parts = [];
    let off = 0;
    for (;;) {
      const e = body.indexOf('\r\n', off);
      if (e < 0) return null;
      const size = parseInt(body.subarray(off, e).toString(), 16);
      if (size === 0) break;
      if (body.length < e + 2 + size + 2) return null;
      parts.push(body.subarray(e + 2, e + 2 + size));
      off = e + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  return { status: Number(m[1]), headers, body };
}

// Sends `head` (request line + headers, without the blank line) and `body`
// over a fresh connection. opts.end: half-close after writing (default
// false: keep the socket open, as a keep-alive client would). Resolves
// {response, closed, error}: `response` the parsed response or null,
// `closed` whether the server closed the connection (opts.waitCloseMs: how
// long to wait for that after the answer; 0, the default, does not wait).
function send(port, head, body = Buffer.alloc(0), { end = false, waitCloseMs = 0, timeoutMs = 20000, earlyMs = 0 } = {}) {
  const t0 = Date.now();
  if (process.env.RAWHTTP_DEBUG) process.stderr.write(`rawhttp: ${head.split('\r\n')[0]} ${body.length}B ...\n`);
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    let buf = Buffer.alloc(0);
    let response = null;
    let error = null;
    let done = false;
    let closeTimer = null;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(overall);
      clearTimeout(closeTimer);
      sock.destroy();
      if (process.env.RAWHTTP_DEBUG) process.stderr.write(`rawhttp: ... ${response && response.status} closed=${closed} ${error} ${Date.now() - t0} ms\n`);
      resolve({ response, closed, error });
    };
    const overall = setTimeout(() => { error = error || `no answer in ${timeoutMs} ms`; finish(false); }, timeoutMs);
    sock.on('data', (c) => {
      buf = Buffer.concat([buf, c]);
      if (!response) {
        try {
          response = parseResponse(buf);
        } catch (e) {
          error = e.message;
        }
        if (response && waitCloseMs === 0) finish(false);
        else if (response) closeTimer = setTimeout(() => finish(false), waitCloseMs);
      }
    });
    sock.on('error', (e) => { error = e.code || e.message; });
    sock.on('close', () => finish(true));
    sock.on('connect', () => {
      // The body goes in 16 KiB pieces, each after the last was taken, and
      // stops once a response is in: a server that answers early (413) and
      // closes must not turn into EPIPE here before its answer is read.
      // Headers longer than a piece go the same way, for the same reason.
      const headBytes = Buffer.from(`${head}\r\n\r\n`, 'latin1');
      const writer = (data, then) => {
        let off = 0;
        const step = () => {
          if (done || response || sock.destroyed) return;
          if (off >= data.length) {
            then();
            return;
          }
          const piece = data.subarray(off, off + 16 * 1024);
          off += piece.length;
          sock.write(piece, (err) => { if (!err) setImmediate(step); });
        };
        return step;
      };
      const next = writer(body, () => { if (end) sock.end(); });
      // earlyMs: after the headers, wait this long for an early answer (as
      // curl does with Expect: 100-continue) before sending the body.
      writer(headBytes, () => {
        if (earlyMs > 0 && body.length) setTimeout(next, earlyMs);
        else next();
      })();
    });
  });
}

// The head of a POST /v1/traces with Content-Type `ct` (left out when null),
// Content-Length `len` and the `extra` header lines, for send().
function postHead(ct, len, extra = []) {
  return [
    'POST /v1/traces HTTP/1.1', 'Host: 127.0.0.1', ...(ct ? [`Content-Type: ${ct}`] : []),
    `Content-Length: ${len}`, ...extra,
  ].join('\r\n');
}

module.exports = { send, postHead, parseResponse, decodeRpcStatus, RpcStatus };
