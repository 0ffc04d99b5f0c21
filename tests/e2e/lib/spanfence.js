// tests/e2e/lib/spanfence.js: runs the real spanfence binary for a test:
// writes its config into the test's scratch directory, starts it with
// --config, waits until the gRPC port accepts connections and /metrics
// answers, captures stderr to a file (printed when the test fails), reads its
// RSS and metrics, and stops it with SIGTERM expecting exit code 0.
// Also: free ports, a Prometheus text parser, and a harness that cleans up.
'use strict';

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');

const deps = require('./deps');
const { collectorConfig, otlpReceiver, otlphttp, envPort, allowlist } = require('./config');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Resolves once pred() holds, polling: a test waits on a condition, never
// on a clock. timeoutMs only ends a run that is stuck.
async function waitUntil(pred, what, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// A port nothing listens on right now (bind port 0, read it, close).
// A port the kernel says is free, never one this process was given
// before: the kernel may hand a port it just released straight back, so two
// calls in a row (a receiver's port, then the metrics') could return the
// same one and the collector would fail to start on its own second listener.
const portsGiven = new Set();

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => {
        if (portsGiven.has(port)) {
          freePort().then(resolve, reject);
          return;
        }
        portsGiven.add(port);
        resolve(port);
      });
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    sock.once('connect', () => { sock.destroy(); resolve(true); });
    sock.once('error', () => resolve(false));
  });
}

// ---- Prometheus text ------------------------------------------------------

// [{name, labels: {k: v}, value}] from exposition text; comments skipped.
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const l = line.trim();
    if (!l || l.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/.exec(l);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"/g;
      let lm;
      while ((lm = re.exec(m[2])) !== null) labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

class Metrics {
  constructor(text) {
    this.text = text;
    this.samples = parseMetrics(text);
  }

  // Sum of the series named `name` whose labels include `labels`;
  // undefined when no such series exists (so a missing metric fails loudly
  // instead of reading as 0).
  get(name, labels = {}) {
    let found = false;
    let sum = 0;
    for (const s of this.samples) {
      if (s.name !== name) continue;
      if (!Object.entries(labels).every(([k, v]) => s.labels[k] === v)) continue;
      found = true;
      sum += s.value;
    }
    return found ? sum : undefined;
  }

  // Like get() but throws, naming the metric, when it is absent.
  must(name, labels = {}) {
    const v = this.get(name, labels);
    if (v === undefined) {
      throw new Error(`metric ${name}${JSON.stringify(labels)} not exported; have:\n` +
        this.samples.map((s) => `  ${s.name}${JSON.stringify(s.labels)} ${s.value}`).join('\n'));
    }
    return v;
  }
}

// ---- the process ------------------------------------------------------------

class Spanfence {
  // `wrap`: a command line the binary runs under (its last word execs
  // "$@"), e.g. unshare for a test-local /etc/resolv.conf; the pid is then
  // still spanfence's.
  // `args`: more arguments after `--config <config>` (a second --config,
  // --set ...).
  constructor({ dir, name = 'spanfence', config, env = {}, grpcPort, metricsPort, wrap = null, args = [] }) {
    this.wrap = wrap;
    this.args = args;
    this.dir = dir;
    this.name = name;
    this.config = config;
    this.env = env;
    this.grpcPort = grpcPort;
    this.metricsPort = metricsPort;
    this.configPath = path.join(dir, `${name}.yaml`);
    this.stderrPath = path.join(dir, `${name}.stderr.log`);
    this.proc = null;
    this.exit = null;   // {code, signal} once exited
  }

  get pid() {
    return this.proc.pid;
  }

  async start(timeoutMs = 20000) {
    fs.writeFileSync(this.configPath, this.config);
    const errFd = fs.openSync(this.stderrPath, 'w');
    const argv = [deps.spanfenceBin(), '--config', this.configPath, ...this.args];
    const [cmd, ...args] = this.wrap ? [...this.wrap, ...argv] : argv;
    this.proc = spawn(cmd, args, {
      env: { ...process.env, ...this.env },
      stdio: ['ignore', errFd, errFd],
    });
    fs.closeSync(errFd);
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.exit) throw new Error(`${this.name} exited during startup: ${JSON.stringify(this.exit)}`);
      if (await canConnect(this.grpcPort)) {
        try {
          const r = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`);
          await r.text();
          if (r.status === 200) return this;
        } catch (_) { /* not up yet */ }
      }
      if (Date.now() > deadline) {
        throw new Error(`${this.name} did not start serving gRPC :${this.grpcPort} and /metrics :${this.metricsPort} within ${timeoutMs} ms`);
      }
      await sleep(50);
    }
  }

  async metrics() {
    let r;
    try {
      try {
        r = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`);
      } catch (e) {
        // A kept-alive connection the collector closed as the request went
        // out (its monitoring server is replaced at a reload): a GET is
        // idempotent, so it is sent again once, on a new connection, as
        // HTTP clients may (RFC 9110, 9.2.2). Seen once in CI, in
        // e2e/signals_trace_control right after a reload.
        const code = e.cause && e.cause.code;
        if ((code !== 'UND_ERR_SOCKET' && code !== 'ECONNRESET') || this.exit) throw e;
        r = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`);
      }
    } catch (e) {
      await sleep(100);   // let a crash be reported as one
      if (this.exit) throw new Error(`${this.name} is gone: exited with ${JSON.stringify(this.exit)}`);
      throw new Error(`GET /metrics failed: ${e.cause ? e.cause.code || e.cause.message : e.message}`);
    }
    const text = await r.text();
    if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${text}`);
    const ct = r.headers.get('content-type') || '';
    if (!ct.startsWith('text/plain')) throw new Error(`/metrics content-type is '${ct}', want text/plain`);
    return new Metrics(text);
  }

  // Poll /metrics until pred(metrics) holds (bounded wait); returns the metrics.
  async waitMetrics(pred, what, timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    let m;
    for (;;) {
      m = await this.metrics();
      if (pred(m)) return m;
      if (Date.now() > deadline) throw new Error(`timed out waiting for metrics: ${what}\n${m.text}`);
      await sleep(100);
    }
  }

  // Resident set size in KiB, from /proc.
  rssKiB() {
    const s = fs.readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(s);
    if (!m) throw new Error(`no VmRSS in /proc/${this.pid}/status`);
    return Number(m[1]);
  }

  // SIGTERM, wait for the drain, and require a clean exit (code 0).
  async stop(timeoutMs = 30000) {
    if (!this.proc || this.exit) {
      if (this.exit && (this.exit.code !== 0 || this.exit.signal)) {
        throw new Error(`${this.name} had already exited: ${JSON.stringify(this.exit)}`);
      }
      return;
    }
    this.proc.kill('SIGTERM');
    let timer;
    const timedOut = new Promise((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs); });
    const res = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (res === null) {
      this.proc.kill('SIGKILL');
      await this.exited;
      throw new Error(`${this.name} did not exit within ${timeoutMs} ms of SIGTERM`);
    }
    if (res.code !== 0 || res.signal) {
      throw new Error(`${this.name} exited with ${JSON.stringify(res)} after SIGTERM, want code 0`);
    }
  }

  kill() {
    if (this.proc && !this.exit) this.proc.kill('SIGKILL');
  }

  // Send `sig`, and resolve the exit ({code, signal}) or null after timeoutMs.
  async signalAndWait(sig, timeoutMs = 30000) {
    this.proc.kill(sig);
    let timer;
    const timedOut = new Promise((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs); });
    const res = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    return res;
  }

  // Resolves once stderr matches `re` `count` times (bounded wait).
  async waitLog(re, what, { count = 1, timeoutMs = 30000 } = {}) {
    const g = new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const n = (this.stderr().match(g) || []).length;
      if (n >= count) return;
      if (this.exit) throw new Error(`${this.name} exited (${JSON.stringify(this.exit)}) while waiting for ${what}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for log: ${what}`);
      await sleep(50);
    }
  }

  stderr() {
    try {
      return fs.readFileSync(this.stderrPath, 'utf8');
    } catch (_) {
      return '';
    }
  }
}

// The config of the brief, with our ports and knobs filled in.
function pipelineConfig({ queueSize = 32, numConsumers = 2, retry = {}, maxRecvMiB } = {}) {
  const r = { initial_interval: '100ms', max_interval: '500ms', max_elapsed_time: '60s', ...retry };
  return collectorConfig({
    receivers: {
      otlp: otlpReceiver({
        grpc: envPort('GRPC'),
        grpcExtra: maxRecvMiB ? { max_recv_msg_size_mib: maxRecvMiB } : {},
      }),
    },
    processors: { 'transform/allowlist': allowlist() },
    exporters: {
      'otlphttp/gateway': otlphttp(`http://127.0.0.1:${envPort('GATEWAY')}`, {
        compression: 'gzip',
        sending_queue: { queue_size: queueSize, num_consumers: numConsumers },
        retry_on_failure: r,
      }),
    },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], processors: ['transform/allowlist'], exporters: ['otlphttp/gateway'] },
    },
  });
}

// Starts spanfence with pipelineConfig(opts) against `gateway`, on free ports.
async function startPipeline(h, gateway, opts = {}) {
  const grpcPort = await freePort();
  const metricsPort = await freePort();
  const sf = new Spanfence({
    dir: h.dir,
    config: pipelineConfig(opts),
    env: {
      SF_GRPC_PORT: String(grpcPort),
      SF_METRICS_PORT: String(metricsPort),
      SF_GATEWAY_PORT: String(gateway.port),
    },
    grpcPort,
    metricsPort,
  });
  h.track(sf);
  await sf.start();
  return sf;
}

// Runs `body(h)` with a scratch dir and cleanup. On failure prints every
// spanfence's stderr, then rethrows; always kills leftovers and closes peers.
async function harness(name, body) {
  const h = {
    dir: deps.tmpDir(name),
    procs: [],
    closers: [],
    track(sf) { this.procs.push(sf); return sf; },
    onCleanup(fn) { this.closers.push(fn); },
  };
  try {
    await body(h);
  } catch (e) {
    for (const sf of h.procs) {
      process.stderr.write(`----- ${sf.name} stderr (${sf.stderrPath}) -----\n${sf.stderr()}\n-----\n`);
    }
    throw e;
  } finally {
    for (const sf of h.procs) sf.kill();
    for (const fn of h.closers.reverse()) {
      try { await fn(); } catch (_) { /* best effort */ }
    }
  }
}

module.exports = { Spanfence, Metrics, parseMetrics, freePort, canConnect, pipelineConfig, startPipeline, harness, sleep, waitUntil };
