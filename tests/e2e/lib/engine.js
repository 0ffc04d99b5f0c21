// tests/e2e/lib/engine.js: a stand-in LLM engine for trace_control (an HTTP
// server on 127.0.0.1 recording every trace level it is asked for) and a
// client for the collector's control socket (one JSON line each way).
'use strict';

const http = require('node:http');
const net = require('node:net');

class Engine {
  constructor() {
    this.levels = [];   // every level asked for, in order
    this.server = null;
    this.port = 0;
  }

  start() {
    return new Promise((resolve, reject) => {
      this.server = http.createServer((req, res) => {
        const m = /[?&]level=(-?\d+)/.exec(req.url);
        if (m) this.levels.push(Number(m[1]));
        req.resume();
        req.on('end', () => { res.writeHead(200, { 'Content-Type': 'text/plain' }); res.end('ok'); });
      });
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.port = this.server.address().port;
        resolve(this.port);
      });
    });
  }

  get url() {
    return `http://127.0.0.1:${this.port}/set_trace_level`;
  }

  stop() {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
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
