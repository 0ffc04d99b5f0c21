// tests/e2e/pipelined_refusals.test.js: every request counted as received
// got an answer the client could read (issue 33). With the downstream down
// and a sending queue of one request, the collector must refuse nearly
// everything (queue_full); a raw socket pipelines N requests in one write,
// HTTP/1.1 (some runs with a request that ends the connection: a framing
// conflict, a body far too large, a half-close after writing, a refused
// request whose body never comes until read_timeout), or N gRPC calls on
// one HTTP/2 connection, more than its max_concurrent_streams
// (h2_attack.py pipeline). It reads every answer
// until the server closes or N are in, then compares with /metrics:
// spanfence_receiver_requests rose by exactly the answers read, refused
// requests by the refusals read, accepted spans by the OK answers' spans.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');

const { Spanfence, freePort, harness, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const deps = require('./lib/deps');
const flood = require('./lib/flood');
const rawhttp = require('./lib/rawhttp');

const PYTHON = '/usr/bin/python3';
const ATTACKER = path.join(__dirname, 'h2_attack.py');
const N = 40;
const SPANS = 8;

function config() {
  return collectorConfig({
    receivers: {
      otlp: otlpReceiver({ grpc: envPort('GRPC'), http: envPort('HTTP'), httpExtra: { read_timeout: '2s' } }),
    },
    exporters: {
      'otlphttp/down': otlphttp(`http://127.0.0.1:${envPort('DOWN')}`, {
        sending_queue: { queue_size: 1, num_consumers: 1 },
        retry_on_failure: { initial_interval: '1s', max_interval: '1s', max_elapsed_time: 0 },
      }),
    },
    metricsPort: envPort('METRICS'),
    pipelines: { traces: { receivers: ['otlp'], exporters: ['otlphttp/down'] } },
  });
}

function counts(m, transport) {
  const rcv = { receiver: 'otlp', transport };
  return {
    requests: m.must('spanfence_receiver_requests', rcv),
    refused: m.get('spanfence_receiver_refused_requests', rcv) || 0,
    accepted: m.must('otelcol_receiver_accepted_spans', rcv),
  };
}

// Writes all of `reqs` at once (pipelined), optionally half-closes, then
// reads answers until `reqs.length` are in or the server closes (or 10 s
// pass). Resolves {statuses, closed}.
function pipeline(port, reqs, { halfClose = false } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    let buf = Buffer.alloc(0);
    const statuses = [];
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ statuses, closed });
    };
    const timer = setTimeout(() => finish(false), 10000);
    sock.on('connect', () => {
      sock.write(Buffer.concat(reqs));
      if (halfClose) sock.end();
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const r = rawhttp.parseResponse(buf);
        if (!r) break;
        buf = buf.subarray(buf.indexOf('\r\n\r\n') + 4 + r.body.length);
        statuses.push(r.status);
      }
      if (statuses.length >= reqs.length) finish(false);
    });
    sock.on('error', () => {});
    sock.on('close', () => finish(true));
  });
}

function post(body, extra = '') {
  return Buffer.concat([Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
    `Content-Type: application/x-protobuf\r\n${extra}Content-Length: ${body.length}\r\n\r\n`), body]);
}

test('pipelined requests the collector refuses are answered, or not counted', async (t) => {
  await harness('pipelined_refusals', async (h) => {
    const [grpcPort, httpPort, metricsPort, downPort] =
      [await freePort(), await freePort(), await freePort(), await freePort()];
    const sf = new Spanfence({ dir: h.dir, config: config(), grpcPort, metricsPort,
      env: { SF_GRPC_PORT: String(grpcPort), SF_HTTP_PORT: String(httpPort),
        SF_METRICS_PORT: String(metricsPort), SF_DOWN_PORT: String(downPort) } });
    h.track(sf);
    await sf.start();
    const file = path.join(h.dir, 'req.pb');
    execFileSync(deps.sendBin(), ['--write', file, '--spans', String(SPANS)], { stdio: 'pipe' });
    const body = fs.readFileSync(file);
    const ok = post(body);

    // Each run: the requests, the one (by index) that ends the connection.
    const runs = {
      plain: { reqs: Array(N).fill(ok) },
      half_close: { reqs: Array(N).fill(ok), halfClose: true },
      framing_conflict: { reqs: Array(N).fill(ok).map((r, i) => (i === 10
        ? Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n' +
          'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n') : r)) },
      far_too_large: { reqs: Array(N).fill(ok).map((r, i) => (i === 10
        ? Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n' +
          `Content-Length: ${200 << 20}\r\n\r\n`) : r)) },
      // The last request is refused at its headers (larger than
      // max_request_body_size, so its body is read and dropped for its
      // 413), but its body never comes: read_timeout closes the
      // connection, and the 413 was never sent.
      deadline: { reqs: [ok, ok, ok, Buffer.concat([Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: x\r\n' +
        `Content-Type: application/x-protobuf\r\nContent-Length: ${30 << 20}\r\n\r\n`), Buffer.alloc(1000, 0x0a)])] },
    };
    for (const [name, run] of Object.entries(runs)) {
      const before = counts(await sf.metrics(), 'http');
      const r = await pipeline(httpPort, run.reqs, run);
      // The collector has finished with what it read once its counters
      // stop moving; the answers read are all the client will ever get.
      let m = await sf.metrics();
      for (let same = 0; same < 5;) {
        await sleep(100);
        const m2 = await sf.metrics();
        same = counts(m2, 'http').requests === counts(m, 'http').requests ? same + 1 : 0;
        m = m2;
      }
      const after = counts(m, 'http');
      const okN = r.statuses.filter((s) => s === 200).length;
      const tally = {};
      for (const s of r.statuses) tally[s] = (tally[s] || 0) + 1;
      t.diagnostic(`http ${name}: ${r.statuses.length}/${run.reqs.length} answers read ${JSON.stringify(tally)}` +
        `${r.closed ? ', then closed' : ''}; counted: ${after.requests - before.requests} received, ` +
        `${after.refused - before.refused} refused`);
      assert.ok(r.statuses.length > 0, `${name}: answers`);
      assert.ok(r.statuses.length - okN > 0, `${name}: the collector refused some`);
      assert.equal(after.requests - before.requests, r.statuses.length,
        `${name}: requests counted as received = answers the client read`);
      assert.equal(after.refused - before.refused, r.statuses.length - okN,
        `${name}: requests counted as refused = refusals the client read`);
      assert.equal(after.accepted - before.accepted, okN * SPANS, `${name}: accepted spans = OK answers' spans`);
    }

    // gRPC: N calls at once on one HTTP/2 connection (16 streams at most
    // open): those past it are refused by the protocol (REFUSED_STREAM),
    // never counted; every call counted got its grpc-status.
    const before = counts(await sf.metrics(), 'grpc');
    const g = await new Promise((resolve, reject) => {
      const p = spawn(PYTHON, [ATTACKER, 'pipeline', '--port', String(grpcPort), '--calls', String(N),
        '--body', file, '--spans-per-call', String(SPANS)], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      p.stdout.on('data', (d) => { out += d; });
      p.stderr.on('data', (d) => { err += d; });
      p.once('error', reject);
      p.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()))
        : reject(new Error(`h2_attack.py pipeline exited ${code}: ${err.slice(-2000)}`))));
    });
    let m = await sf.metrics();
    for (let same = 0; same < 5;) {
      await sleep(100);
      const m2 = await sf.metrics();
      same = counts(m2, 'grpc').requests === counts(m, 'grpc').requests ? same + 1 : 0;
      m = m2;
    }
    const after = counts(m, 'grpc');
    t.diagnostic(`grpc: ${JSON.stringify(g)}; counted: ${after.requests - before.requests} received, ` +
      `${after.refused - before.refused} refused`);
    assert.ok(g.answered > 0 && g.answered - g.ok > 0, 'gRPC: answers, refusals among them');
    assert.equal(g.answered + g.refused_stream + g.unanswered, N, 'gRPC: every call accounted for');
    assert.equal(g.unanswered, 0, 'gRPC: every call answered or refused by the protocol');
    assert.equal(after.requests - before.requests, g.answered, 'gRPC: calls counted as received = answers read');
    assert.equal(after.refused - before.refused, g.answered - g.ok, 'gRPC: calls counted as refused = refusals read');
    assert.equal(after.accepted - before.accepted, g.ok * SPANS, 'gRPC: accepted spans = OK answers\' spans');
    // The downstream comes up: what was accepted drains, and the
    // collector stops cleanly.
    const sink = new flood.Sink(downPort);
    h.onCleanup(() => sink.stop());
    await sink.start();
    await sf.waitMetrics((x) => x.must('spanfence_exporter_queued_spans', { exporter: 'otlphttp/down' }) === 0,
      'the queue drained', 30000);
    await sf.stop(20000);
  });
});
