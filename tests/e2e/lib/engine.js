// tests/e2e/lib/engine.js: a stand-in for SGLang's HTTP server as far as
// trace_control sees it, and a client for the collector's control socket
// (one JSON line each way).
//
// The stand-in implements SGLang's /set_trace_level handler
// (python/sglang/srt/entrypoints/http_server.py, utils/auth.py):
//  - GET or POST; any other method 405; any other path 404;
//  - the level is the required query parameter `level`, an integer >= 0; a
//    body is not read; a missing or bad level is answered 400 with SGLang's
//    error body (FastAPI's validation error, turned into 400);
//  - with an API key (SGLang's --api-key): `Authorization: Bearer <key>`
//    (the scheme case-insensitive) or `x-api-key: <key>`, else 401
//    {"error":"Unauthorized"};
//  - success is 200 with body `success`.
// It starts at SGLang's default trace level 3 unless told otherwise, and
// can be stopped and started again on the same port (an engine restart),
// or made to answer a fixed status (an engine in trouble).
'use strict';

const http = require('node:http');
const https = require('node:https');
const net = require('node:net');

class Engine {
  // tls: {key, cert} (PEM): serve https instead of http.
  constructor({ apiKey = null, level = 3, tls = null } = {}) {
    this.apiKey = apiKey;
    this.tls = tls;
    this.level = level;     // the level it runs at now
    this.levels = [];       // every level it took, in order
    this.requests = [];     // every request: {method, url, status, authorization}
    this.status = 0;        // answer this to every request instead (0: behave)
    this.server = null;
    this.sockets = new Set();
    this.port = 0;
    this.waiters = [];
  }

  // Listen (again) on 127.0.0.1; a later start keeps the port. `level`: the
  // level the (re)started engine runs at.
  start({ level } = {}) {
    if (level !== undefined) this.level = level;
    return new Promise((resolve, reject) => {
      const handler = (req, res) => this._handle(req, res);
      const server = this.tls ? https.createServer(this.tls, handler) : http.createServer(handler);
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

  get url() {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}/set_trace_level`;
  }

  // Down: connections refused from now on.
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

  _authorized(req) {
    if (this.apiKey == null) return true;
    const authz = req.headers.authorization;
    if (authz) {
      const sp = authz.indexOf(' ');
      if (sp > 0 && authz.slice(0, sp).toLowerCase() === 'bearer' && authz.slice(sp + 1) === this.apiKey) return true;
    }
    return req.headers['x-api-key'] === this.apiKey;
  }

  _handle(req, res) {
    req.resume();   // SGLang does not read the body
    req.on('end', () => {
      const rec = { method: req.method, url: req.url, status: 0, authorization: req.headers.authorization || null };
      this.requests.push(rec);
      const reply = (status, body, type = 'application/json') => {
        rec.status = status;
        res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
        this._wake();
      };
      if (!this._authorized(req)) return reply(401, '{"error":"Unauthorized"}');
      if (this.status) return reply(this.status, '{"error":"scripted"}');
      const u = new URL(req.url, 'http://engine');
      if (u.pathname !== '/set_trace_level') return reply(404, '{"detail":"Not Found"}');
      if (req.method !== 'GET' && req.method !== 'POST') return reply(405, '{"detail":"Method Not Allowed"}');
      const q = u.searchParams.get('level');
      if (q === null || !/^\+?\d+$/.test(q.trim())) {
        const msg = q === null ? "[{'type': 'missing', 'loc': ('query', 'level'), 'msg': 'Field required', 'input': None}]"
          : `[{'type': 'int_parsing', 'loc': ('query', 'level'), 'msg': 'Input should be a valid integer, unable to parse string as an integer', 'input': '${q}'}]`;
        return reply(400, JSON.stringify({ object: 'error', message: msg, type: 'Bad Request', param: null, code: 400 }));
      }
      this.level = Number(q.trim());
      this.levels.push(this.level);
      return reply(200, 'success', 'text/plain; charset=utf-8');
    });
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
        reject(new Error(`engine: timed out waiting for ${what} (level ${this.level}, levels ${JSON.stringify(this.levels)}, ` +
          `statuses ${JSON.stringify(this.requests.map((r) => r.status))})`));
      }, timeoutMs);
      this.waiters.push(check);
    });
  }
}

// One request on the control socket: resolves the parsed reply.
function control(socketPath, req, timeoutMs = 20000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ path: socketPath });
    let buf = '';
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`control ${req.op}: no answer in ${timeoutMs} ms`)); }, timeoutMs);
    sock.on('connect', () => sock.write(`${JSON.stringify(req)}\n`));
    sock.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        sock.destroy();
        try { resolve(JSON.parse(buf.slice(0, nl))); } catch (e) { reject(e); }
      }
    });
    sock.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

module.exports = { Engine, control };
